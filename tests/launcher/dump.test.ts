// A tenant's data out and back: `dump` of a group, `import` of that file into an empty group, and
// a dump of the second group is the same file, byte for byte (same documents, same order).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { createWorkspace, type Workspace } from './helpers.js';

const FIXTURES = path.join(packageRoot, 'tests', 'fixtures', 'vcons');

describe('vcon-launch dump, then import', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['from', 'into']);
  });
  afterAll(async () => {
    await ws?.cleanup();
  });

  test('a dump imported into an empty group dumps back identical', async () => {
    const loaded = await ws.run(['import', '--group', 'from', FIXTURES, '--json']);
    const stored = JSON.parse(loaded.stdout).stored as number;
    expect(stored).toBeGreaterThan(10);

    const first = path.join(ws.dir, 'from.ndjson');
    const out = await ws.run(['dump', '--group', 'from', '--output', first]);
    expect(out.exitCode, out.stderr).toBe(0);
    expect(out.stderr).toMatch(new RegExp(`dumped ${stored} vCon\\(s\\) of group from`));
    const text = readFileSync(first, 'utf8');
    expect(text.split('\n').filter(Boolean)).toHaveLength(stored);

    const back = await ws.run(['import', '--group', 'into', first, '--json']);
    expect(back.exitCode, back.stderr).toBe(0);
    expect(JSON.parse(back.stdout)).toMatchObject({ stored, rejected: 0, replaced: 0 });

    // To stdout this time, as `dump --group X > file` is used.
    const again = await ws.run(['dump', '--group', 'into'], { stripFinalNewline: false });
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stdout).toBe(text);
  });

  test('import reads .jsonl too, one vCon per line, and rejects a bad line alone', async () => {
    const file = path.join(ws.dir, 'lines.jsonl');
    const uuid = '0190f0e0-0000-7000-8000-00000000abcd';
    writeFileSync(file, `${JSON.stringify({ vcon: '0.3.0', uuid, created_at: '2026-01-01T00:00:00Z', parties: [] })}\n{not json\n\n`);
    const r = await ws.run(['import', '--group', 'into', file, '--json']);
    expect(r.exitCode).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ stored: 1, rejected: 1 });
    expect(report.outcomes.find((o: any) => o.outcome === 'rejected')).toMatchObject({
      source: `${file}:2`,
      reason: expect.stringMatching(/^invalid_json: line 2/),
    });
  });

  test('dump refuses a bad --after with the API message', async () => {
    const r = await ws.run(['dump', '--group', 'into', '--after', 'nope']);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/invalid_parameter: after/);
  });
});
