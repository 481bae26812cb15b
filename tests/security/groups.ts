// Two groups for the isolation probes: each its own instance, schema, keys and captured log, and
// content whose every text carries a marker unique to the group, so a leak can be found by
// searching any answer's raw text for the other group's markers.
import { randomBytes, randomUUID } from 'node:crypto';
import { parseConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startInstance, type Instance } from '../../src/main.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';

export interface Markers {
  subject: string;
  party: string;
  email: string;
  dialog: string;
  analysis: string;
  summary: string;
  attachment: string;
  legacyBody: string;
  analysisType: string;
  vendor: string;
  purpose: string;
  legacyType: string;
  tagKey: string;
  tagValue: string;
  status: string;
  table: string;
}

export interface Group {
  name: 'a' | 'b';
  instance: Instance;
  url: string;
  base: string;
  schema: string;
  rwKey: string;
  roKey: string;
  markers: Markers;
  /** uuids that exist only in this group (the shared uuid is not among them). */
  ownUuids: string[];
  /** Every vCon this group holds, tagged ones included. */
  total: number;
  tagged: number;
  /** Raw pino lines written by this instance. */
  logLines: string[];
  api(path: string, init?: RequestInit & { json?: unknown; key?: string | null }): Promise<{ status: number; text: string; body: any }>;
}

const word = () => randomBytes(5).toString('hex');

function markersFor(g: string): Markers {
  const r = word();
  const m = (field: string) => `${g}${field}${r}`;
  return {
    subject: m('subj'),
    party: m('party'),
    email: `${m('mail')}@${g}corp.example`,
    dialog: m('dlg'),
    analysis: m('ana'),
    summary: m('sum'),
    attachment: m('att'),
    legacyBody: m('leg'),
    analysisType: m('atype'),
    vendor: m('vendor'),
    purpose: m('purpose'),
    legacyType: m('ltype'),
    tagKey: m('tkey'),
    tagValue: m('tval'),
    status: m('status'),
    table: m('table'),
  };
}

/** The markers that are document content (what logs must never carry). */
export const contentMarkers = (m: Markers) => [
  m.subject,
  m.party,
  m.email,
  m.dialog,
  m.analysis,
  m.summary,
  m.attachment,
  m.legacyBody,
  m.tagValue,
  m.status,
];

/** Every string by which another group's data could be recognised in an answer. */
export const leakMarkers = (g: Group) => [...Object.values(g.markers), ...g.ownUuids, g.schema, g.rwKey, g.roKey];

/** The group's version of a vCon: same shape in both groups, every text marked. */
export function documentFor(m: Markers, uuid: string, n = 0) {
  const at = new Date(Date.now() - n * 60_000).toISOString();
  return {
    uuid,
    vcon: '0.3.0',
    created_at: at,
    subject: `Refund request ${m.subject} ${n}`,
    parties: [{ name: `Pat ${m.party}`, mailto: `mailto:${m.email}`, tel: `+1555${n}0001111` }, { name: 'Agent' }],
    dialog: [{ type: 'text', start: at, parties: [0, 1], body: `I would like a refund ${m.dialog}`, encoding: 'none', mediatype: 'text/plain' }],
    analysis: [
      { type: m.analysisType, vendor: m.vendor, body: `refund analysis ${m.analysis}`, encoding: 'none', dialog: 0 },
      { type: 'summary', vendor: m.vendor, body: `refund summary ${m.summary}`, encoding: 'none' },
    ],
    attachments: [
      { purpose: m.purpose, encoding: 'none', body: `refund attachment ${m.attachment}` },
      { type: m.legacyType, encoding: 'none', body: `legacy ${m.legacyBody}` },
    ],
  };
}

/**
 * Starts one group's instance (own schema, own keys, logs captured at info) and seeds it:
 * the shared uuid plus `extra` vCons of its own, tags on the shared one and on `taggedExtra`.
 */
export async function startGroup(name: 'a' | 'b', shared: string, extra: number, taggedExtra: number): Promise<Group> {
  const schema = testSchemaName(`iso_${name}`);
  const rwKey = `key-${name}-rw-${word()}`;
  const roKey = `key-${name}-ro-${word()}`;
  const config = parseConfig({
    MCP_TRANSPORT: 'http',
    MCP_HTTP_PORT: '0',
    DATABASE_URL: databaseUrl(),
    SUPABASE_DB_SCHEMA: schema,
    API_KEYS: rwKey,
    API_KEYS_READONLY: roKey,
    LOG_LEVEL: 'debug',
    VCON_INSTANCE_LABEL: `label-${name}`,
    EMBEDDINGS_PROVIDER: 'hashing',
  });
  const logLines: string[] = [];
  const instance = await startInstance(config, { log: createLogger(config, { write: (l: string) => logLines.push(l) }) });
  const url = instance.url!;
  const base = `${url}${config.rest.basePath}`;
  const markers = markersFor(name);
  const api: Group['api'] = async (path, init = {}) => {
    const headers = new Headers(init.headers);
    const key = init.key === undefined ? rwKey : init.key;
    if (key !== null) headers.set('authorization', `Bearer ${key}`);
    let body = init.body;
    if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      headers.set('content-type', 'application/json');
    }
    const res = await fetch(`${base}${path}`, { ...init, headers, body, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, text, body: parsed };
  };
  const ownUuids = Array.from({ length: extra }, () => randomUUID());
  const docs = [documentFor(markers, shared, 0), ...ownUuids.map((u, i) => documentFor(markers, u, i + 1))];
  // wait_for=search: the searches find them however long indexing takes on a loaded machine.
  const created = await api('/vcons/batch?wait_for=search', { method: 'POST', json: docs });
  if (created.status !== 201) throw new Error(`seeding ${name}: ${created.status} ${created.text}`);
  for (const u of [shared, ...ownUuids.slice(0, taggedExtra)]) {
    for (const [k, v] of [
      [markers.tagKey, markers.tagValue],
      ['status', markers.status],
    ]) {
      const r = await api(`/vcons/${u}/tags/${k}`, { method: 'PUT', json: { value: v } });
      if (r.status !== 200) throw new Error(`tagging ${name}: ${r.status} ${r.text}`);
    }
  }
  const admin = adminSql();
  await admin.unsafe(`create table "${schema}"."${markers.table}" (x int)`);
  // Statistics (pg_stats most_common_vals) hold real values: make them exist for the probes.
  for (const t of ['vcons', 'vcon_parties', 'vcon_tags', 'search_units']) await admin.unsafe(`analyze "${schema}"."${t}"`);
  await admin.end();
  return {
    name,
    instance,
    url,
    base,
    schema,
    rwKey,
    roKey,
    markers,
    ownUuids,
    total: 1 + extra,
    tagged: 1 + taggedExtra,
    logLines,
    api,
  };
}

export async function stopGroup(g: Group | undefined): Promise<void> {
  if (!g) return;
  await g.instance.stop();
  const admin = adminSql();
  await admin.unsafe(`drop schema if exists "${g.schema}" cascade`);
  await admin.end();
}

/**
 * The other group's markers found in an answer (empty when none). Markers the request itself
 * carried (`asked`: its path and arguments) may be echoed back, e.g. "vCon <uuid> not found".
 */
export function leaksIn(text: string, other: Group, asked = ''): string[] {
  const lower = text.toLowerCase();
  const echo = asked.toLowerCase();
  return leakMarkers(other).filter((m) => lower.includes(m.toLowerCase()) && !echo.includes(m.toLowerCase()));
}
