// The official MCP Inspector (`inspector --cli --strict`, pinned in devDependencies) lists the tools
// over stdio and over Streamable HTTP and lints their schemas for portability. Every tool a session
// can be offered (plugin tools included) must come back with no finding at all.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { packageRoot } from '../../src/paths.js';
import { TOOLS } from '../../src/mcp/tools.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { PLUGIN_PATH } from './helpers.js';

const MAIN = path.join(packageRoot, 'dist', 'src', 'main.js');
const INSPECTOR = path.join(packageRoot, 'node_modules', '.bin', 'inspector');

interface InspectorReport {
  result: { tools: { name: string; inputSchema: unknown }[] };
  /** Present only when something was found: per tool, the findings with rule, path and issue. */
  schemaFindings?: { toolName: string; findings: { rule: string; path: string; issue: string }[] }[];
}

/** Runs `inspector --cli --strict --method tools/list --format json` and returns its report. */
async function inspect(args: string[]): Promise<{ report: InspectorReport; stderr: string }> {
  const run = await execa(INSPECTOR, ['--cli', '--strict', '--format', 'json', '--method', 'tools/list', ...args], {
    cwd: packageRoot,
    reject: false,
    timeout: 60_000,
    // Its catalog and client config go to a throwaway home, never the developer's.
    env: { HOME: path.join(packageRoot, '.vcon', 'inspector-home') },
  });
  expect(run.exitCode, run.stderr).toBe(0);
  return { report: JSON.parse(run.stdout) as InspectorReport, stderr: run.stderr };
}

/** The findings as readable lines, so a failure names each tool, path and rule. */
const findingsOf = (r: InspectorReport) => (r.schemaFindings ?? []).flatMap((t) => t.findings.map((f) => `${t.toolName} ${f.path}: ${f.rule}`));

const writeTools = TOOLS.map((t) => t.name);
const readTools = TOOLS.filter((t) => t.scope === 'read').map((t) => t.name);

beforeAll(() => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build`);
  if (!existsSync(INSPECTOR)) throw new Error(`${INSPECTOR} is missing: run npm ci`);
});

describe('MCP Inspector --strict, stdio', () => {
  const schema = testSchemaName('insp');
  afterAll(async () => {
    const admin = adminSql();
    await admin.unsafe(`drop schema if exists "${schema}" cascade`);
    await admin.end();
  });

  it('lists every tool, plugin tools included, with no schema-portability finding', async () => {
    const env = { DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema, VCON_PLUGINS_PATH: PLUGIN_PATH, LOG_LEVEL: 'silent' };
    const { report, stderr } = await inspect([...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]), process.execPath, MAIN]);
    const names = report.result.tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(writeTools));
    expect(names.length).toBeGreaterThan(writeTools.length); // the fixture plugin's tools too
    expect(findingsOf(report)).toEqual([]);
    expect(stderr).not.toMatch(/^(Warning|Error): tool/m);
  });
});

describe('MCP Inspector --strict, Streamable HTTP', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ VCON_PLUGINS_PATH: PLUGIN_PATH });
  });
  afterAll(async () => srv?.close());

  it.each([
    ['read-write', KEY, writeTools],
    ['read-only', RO_KEY, readTools],
  ])(
    '%s key: the offered tools have no schema-portability finding',
    async (_label, key, expected) => {
      const url = `${srv.instance.url}/mcp`;
      const { report, stderr } = await inspect(['--transport', 'http', '--server-url', url, '--header', `Authorization: Bearer ${key}`]);
      const names = report.result.tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(expected));
      if (key === RO_KEY) expect(names.filter((n) => !readTools.includes(n))).toEqual([]);
      expect(findingsOf(report)).toEqual([]);
      expect(stderr).not.toMatch(/^(Warning|Error): tool/m);
    },
    90_000,
  );

  it('reports the key problem for a wrong key, not an OAuth prompt', async () => {
    const url = `${srv.instance.url}/mcp`;
    const run = await execa(
      INSPECTOR,
      [
        '--cli',
        '--format',
        'json',
        '--method',
        'tools/list',
        '--transport',
        'http',
        '--server-url',
        url,
        '--header',
        'Authorization: Bearer wrong-key',
      ],
      { cwd: packageRoot, reject: false, timeout: 60_000, input: '', env: { HOME: path.join(packageRoot, '.vcon', 'inspector-home') } },
    );
    const out = `${run.stdout}\n${run.stderr}`;
    expect(out).toContain('API key invalid');
    expect(out).not.toMatch(/OAuth/);
  }, 90_000);
});
