// import of the shared fixtures into a stopped group (through a temporary instance): the counts
// match what the API says to each file posted alone, in the same order, into a fresh schema.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createWorkspace, serverPidsForSchema, type Workspace } from './helpers.js';

const FIXTURES = '/work/shared/fixtures/vcons';

describe('vcon-launch import', () => {
  let ws: Workspace;
  let reference: TestServer;
  beforeAll(async () => {
    ws = createWorkspace(['imp']);
    reference = await startTestServer({ LOG_LEVEL: 'silent', EMBEDDINGS_PROVIDER: 'hashing' });
  });
  afterAll(async () => {
    await reference?.close();
    await ws?.cleanup();
  });

  test('reports stored / replaced / rejected exactly as the API judges each file, and exits 1', async () => {
    const r = await ws.run(['import', '--group', 'imp', FIXTURES, '--json']);
    expect(r.exitCode, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout);

    // The expectation: each file posted alone, in sorted order, to a fresh schema.
    const files = readdirSync(FIXTURES).filter((f) => /\.(json|vcon)$/.test(f)).sort();
    const expected: Record<string, string> = {};
    for (const f of files) {
      const res = await reference.api('/vcons', { method: 'POST', body: readFileSync(path.join(FIXTURES, f), 'utf8'), headers: { 'content-type': 'application/json' } });
      expected[f] = res.status === 201 ? 'stored' : res.status === 200 ? 'replaced' : 'rejected';
    }
    const actual = Object.fromEntries(report.outcomes.map((o: any) => [path.basename(o.source), o.outcome]));
    expect(actual).toEqual(expected);
    const count = (o: string) => Object.values(expected).filter((x) => x === o).length;
    expect(report).toMatchObject({ files: files.length, stored: count('stored'), replaced: count('replaced'), rejected: count('rejected') });
    expect(report.rejected).toBeGreaterThan(0);
    for (const f of files.filter((f) => f.startsWith('invalid__'))) expect(actual[f]).toBe('rejected');
    for (const o of report.outcomes.filter((o: any) => o.outcome === 'rejected')) expect(o.reason).toMatch(/^\w+: \S/);
    // The temporary instance is gone.
    expect(serverPidsForSchema(ws.schemas.imp)).toEqual([]);
  }, 60_000);

  test('a second run replaces what has a uuid, and the summary is readable', async () => {
    const r = await ws.run(['import', '--group', 'imp', FIXTURES]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/^imported into group imp via a temporary instance: \d+ file\(s\)/);
    const n = (label: string) => Number(new RegExp(`^  ${label}\\s+(\\d+)$`, 'm').exec(r.stdout)![1]);
    // Only the files without a uuid are stored again (the server assigns a new one).
    const withoutUuid = readdirSync(FIXTURES)
      .filter((f) => f.endsWith('.json'))
      .filter((f) => {
        try {
          return typeof JSON.parse(readFileSync(path.join(FIXTURES, f), 'utf8')).uuid !== 'string';
        } catch {
          return true;
        }
      });
    expect(n('stored')).toBeLessThanOrEqual(withoutUuid.length);
    expect(n('replaced')).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/invalid__conserver__bad_party_ref\.json: validation_failed: /);
    expect(r.stderr).toMatch(/\d+ vCon\(s\) rejected/);
  }, 60_000);
});
