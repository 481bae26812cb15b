// A tenant's data out and back: `dump` of a group, `import` of that file into an empty group, and
// a dump of the second group is the same file, byte for byte (same documents, same order). Import
// streams an NDJSON file: bad lines are rejected alone, a line over the body limit unread.
import { readFileSync, statSync, writeFileSync } from 'node:fs';
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

    // Importing the dump again stores nothing new: every line replaces its own vCon.
    const twice = await ws.run(['import', '--group', 'into', first, '--json']);
    expect(twice.exitCode, twice.stderr).toBe(0);
    expect(JSON.parse(twice.stdout)).toMatchObject({ stored: 0, replaced: stored, rejected: 0 });
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

describe('vcon-launch import of an NDJSON file, streamed', () => {
  // A small body limit: batches must stay under it, and a line over it can never be sent.
  const LIMIT = 64 * 1024;
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['small'], { small: { REST_API_BODY_LIMIT: String(LIMIT) } });
  });
  afterAll(async () => {
    await ws?.cleanup();
  });

  const vcon = (i: number, extra: Record<string, unknown> = {}) => ({
    vcon: '0.3.0',
    uuid: `0190f0e0-0000-7000-8000-${String(i).padStart(12, '0')}`,
    created_at: '2026-01-01T00:00:00Z',
    subject: `line ${i}`,
    parties: [{ name: 'Ann' }],
    ...extra,
  });

  test('bad lines are rejected alone as file:line, the others stored; a uuid met twice is stored from its last line', async () => {
    const file = path.join(ws.dir, 'mixed.ndjson');
    const lines = [
      JSON.stringify(vcon(1, { subject: 'first of uuid 1' })),
      '{not json',
      '{"vcon":"0.3.0","subject":"a","parties":[],"subject":"b"}',
      JSON.stringify(vcon(2)),
      JSON.stringify(vcon(3, { subject: 'x'.repeat(LIMIT) })),
      '',
      `${JSON.stringify(vcon(4))}\r`,
      JSON.stringify(vcon(1, { subject: 'last of uuid 1' })),
      JSON.stringify(vcon(5)),
    ];
    writeFileSync(file, lines.join('\n'));
    const r = await ws.run(['import', '--group', 'small', file, '--json']);
    expect(r.exitCode).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ stored: 4, rejected: 3, skipped: 1 });
    const by = Object.fromEntries(report.outcomes.map((o: any) => [o.source.slice(file.length), o]));
    expect(by[':2']).toMatchObject({ outcome: 'rejected', reason: 'invalid_json: line 2 is not JSON (column 2)' });
    expect(by[':3'].reason).toMatch(/^validation_failed: Invalid line: subject: field name "subject" appears more than once/);
    expect(by[':5'].reason).toMatch(new RegExp(`^payload_too_large: line 5 is ${lines[4].length} bytes, more than .*REST_API_BODY_LIMIT ${LIMIT}`));
    expect(by[':1']).toMatchObject({ outcome: 'skipped', reason: `same uuid as ${file}:8, which is stored instead` });
    for (const n of [4, 7, 8, 9]) expect(by[`:${n}`]).toMatchObject({ outcome: 'stored' });
    expect(report.collisions).toEqual([{ uuid: vcon(1).uuid, sources: [`${file}:1`, `${file}:8`], kept: `${file}:8` }]);
    // The last line of uuid 1 is what the group holds.
    const dumped = await ws.run(['dump', '--group', 'small']);
    const docs = dumped.stdout.split('\n').map((l) => JSON.parse(l));
    expect(docs.map((d) => d.subject)).toEqual(['last of uuid 1', 'line 2', 'line 4', 'line 5']);
  });

  test('a file many batches long is read a piece at a time, and a line far over the limit is never held whole', async () => {
    const file = path.join(ws.dir, 'big.jsonl');
    const pad = 'p'.repeat(1500);
    const lines = Array.from({ length: 800 }, (_, i) => JSON.stringify(vcon(100 + i, { parties: [{ name: 'Ann', meta: { pad } }] })));
    // 4 MB in one line, in the middle.
    lines.splice(400, 0, JSON.stringify(vcon(99, { subject: 'y'.repeat(4 * 1024 * 1024) })));
    writeFileSync(file, lines.join('\n') + '\n');
    const size = statSync(file).size;
    const r = await ws.run(['import', '--group', 'small', file, '--json']);
    expect(r.exitCode).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ stored: 800, rejected: 1 });
    expect(report.outcomes.find((o: any) => o.outcome === 'rejected')).toMatchObject({
      source: `${file}:401`,
      reason: expect.stringMatching(/^payload_too_large: line 401 is \d+ bytes/),
    });
    // What the import held at once: a read buffer and a few batches, well under the file (5.3 MB)
    // and under the long line alone.
    expect(report.peak_buffered_bytes).toBeGreaterThan(0);
    expect(report.peak_buffered_bytes).toBeLessThan(1024 * 1024);
    expect(size).toBeGreaterThan(5 * 1024 * 1024);
  });
});
