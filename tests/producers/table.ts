// The public producers' vCons (tests/fixtures/producers, sources in its SOURCES.md) and the verdict
// table beside them (verdicts.tsv): what each validation mode must answer to each file, written down
// file by file, never derived from the validator.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/paths.js';
import type { ValidationMode } from '../../src/domain/vcon.js';

export const PRODUCERS_DIR = path.join(packageRoot, 'tests', 'fixtures', 'producers');
export const MODES = ['strict', 'ietf', 'lenient'] as const satisfies readonly ValidationMode[];

export type Verdict = { kind: 'accepted'; warnings: string[] } | { kind: 'refused'; paths: string[] } | { kind: 'unreadable' };

export interface ProducerFile {
  /** Path under tests/fixtures/producers: `<owner>+<repo>/<path in the repository>`. */
  file: string;
  text: string;
  /** Parsed, or undefined when the file is not JSON. */
  json: any;
  verdict: Record<ValidationMode, Verdict>;
  why: string;
}

function parseCell(cell: string, where: string): Verdict {
  const [word, ...paths] = cell.split(' ');
  if (word === 'accepted' && paths.length === 0) return { kind: 'accepted', warnings: [] };
  if (word === 'warned' && paths.length > 0) return { kind: 'accepted', warnings: paths };
  if (word === 'refused' && paths.length > 0) return { kind: 'refused', paths };
  if (word === 'unreadable' && paths.length === 0) return { kind: 'unreadable' };
  throw new Error(`verdicts.tsv ${where}: cannot read "${cell}"`);
}

/** Every file of the table, read; throws if the table and the folder disagree. */
export function loadProducers(): ProducerFile[] {
  const lines = readFileSync(path.join(PRODUCERS_DIR, 'verdicts.tsv'), 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'));
  const rows = lines.map((line, i) => {
    const cells = line.split('\t');
    if (cells.length !== 5) throw new Error(`verdicts.tsv line ${i + 1}: 5 columns expected, got ${cells.length}`);
    const [file, strict, ietf, lenient, why] = cells;
    const text = readFileSync(path.join(PRODUCERS_DIR, file), 'utf8');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    const verdict = { strict: parseCell(strict, file), ietf: parseCell(ietf, file), lenient: parseCell(lenient, file) };
    return { file, text, json, verdict, why };
  });
  const listed = new Set(rows.map((r) => r.file));
  const present = (readdirSync(PRODUCERS_DIR, { recursive: true }) as string[])
    .map((f) => f.split(path.sep).join('/'))
    .filter((f) => f.includes('/') && /\.(vcon|json)$/.test(f));
  const unlisted = present.filter((f) => !listed.has(f));
  if (unlisted.length) throw new Error(`files without a verdict in verdicts.tsv: ${unlisted.join(', ')}`);
  return rows;
}

/**
 * What the service may add to or change in a stored plain vCon (docs/api.md): `uuid` when it was
 * assigned (and lower-cased when sent in capitals), `created_at` when missing, `updated_at` on a
 * replace. The stored document with exactly those put back as the file has them (or removed when
 * the file has none), so that it serialises byte-equal to the file's parsed value: every value, and
 * key order at every depth. A uuid or created_at the file has is kept as the stored one otherwise.
 */
export function asSent(stored: Record<string, unknown>, sent: Record<string, unknown>, replaced: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(stored)) {
    const own = Object.hasOwn(sent, k);
    if (k === 'uuid' || k === 'created_at' || (k === 'updated_at' && replaced)) {
      if (!own) continue;
      if (k === 'uuid' && typeof sent.uuid === 'string' && v === sent.uuid.toLowerCase()) out[k] = sent.uuid;
      else out[k] = k === 'updated_at' ? sent[k] : v;
    } else {
      out[k] = v;
    }
  }
  return out;
}
