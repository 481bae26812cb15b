// import of the fixtures into a stopped group (through a temporary instance): the counts match
// what the API says to each file posted alone, in the same order, into a fresh schema; files that
// share a uuid are named and only the last is sent; a second import stores nothing new.
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { canonicalJson, contentUuid, uuidV5 } from '../../cli/content-uuid.js';
import { classifyVcon } from '../../src/domain/vcon.js';
import { packageRoot } from '../../src/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { api, createWorkspace, serverPidsForSchema, type Workspace } from './helpers.js';

const FIXTURES = path.join(packageRoot, 'tests', 'fixtures', 'vcons');

/** The uuid a valid fixture file is filed under (plain, JWS header or JWE unprotected header), if any. */
function uuidInFile(file: string): string | undefined {
  try {
    return classifyVcon(JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8'))).uuid;
  } catch {
    return undefined; // invalid: the server rejects it, so it cannot replace anything
  }
}

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

    // The expectation: files sharing a uuid are skipped but the last; every other file posted
    // alone, in sorted order, to a fresh schema.
    const files = readdirSync(FIXTURES)
      .filter((f) => /\.(json|vcon)$/.test(f))
      .sort();
    const byUuid = new Map<string, string[]>();
    for (const f of files) {
      const u = uuidInFile(f);
      if (u) byUuid.set(u, [...(byUuid.get(u) ?? []), f]);
    }
    const shared = [...byUuid].filter(([, fs]) => fs.length > 1);
    expect(shared.length).toBeGreaterThan(0); // the IETF plain, JWS and JWE forms of one vCon
    const expected: Record<string, string> = {};
    for (const [, fs] of shared) for (const f of fs.slice(0, -1)) expected[f] = 'skipped';
    for (const f of files.filter((f) => !expected[f])) {
      const res = await reference.api('/vcons', {
        method: 'POST',
        body: readFileSync(path.join(FIXTURES, f), 'utf8'),
        headers: { 'content-type': 'application/json' },
      });
      expected[f] = res.status === 201 ? 'stored' : res.status === 200 ? 'replaced' : 'rejected';
    }
    const actual = Object.fromEntries(report.outcomes.map((o: any) => [path.basename(o.source), o.outcome]));
    expect(actual).toEqual(expected);
    const count = (o: string) => Object.values(expected).filter((x) => x === o).length;
    expect(report).toMatchObject({
      files: files.length,
      stored: count('stored'),
      replaced: count('replaced'),
      rejected: count('rejected'),
      skipped: count('skipped'),
    });
    // Each collision is named with every file and the one stored.
    expect(report.collisions.map((c: any) => [c.uuid, c.sources.map((x: string) => path.basename(x)), path.basename(c.kept)]).sort()).toEqual(
      shared.map(([u, fs]) => [u, fs, fs.at(-1)]).sort(),
    );
    expect(report.rejected).toBeGreaterThan(0);
    for (const f of files.filter((f) => f.startsWith('invalid__'))) expect(actual[f]).toBe('rejected');
    for (const o of report.outcomes.filter((o: any) => o.outcome === 'rejected')) expect(o.reason).toMatch(/^\w+: \S/);
    // The temporary instance is gone.
    expect(serverPidsForSchema(ws.schemas.imp)).toEqual([]);
  });

  test('a second run stores nothing new: files without a uuid are replaced under their content-derived one', async () => {
    const r = await ws.run(['import', '--group', 'imp', FIXTURES]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/^imported into group imp via a temporary instance: \d+ file\(s\)/);
    const n = (label: string) => Number(new RegExp(`^  ${label}\\s+(\\d+)`, 'm').exec(r.stdout)![1]);
    expect(n('stored')).toBe(0);
    expect(n('replaced')).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/^ {2}skipped {2}\d+ \(another file of this import has the same uuid; the last in path order is stored\)$/m);
    // The IETF plain, JWE and JWS forms of one vCon: every file named, and the one stored.
    expect(r.stdout).toMatch(
      /^ {4}uuid [0-9a-f-]{36}: \S+ab_call_ext_rec__external-url-content_hash\.json, \S+jwe-encrypted-form\.json, \S+jws-signed-form\.json -> stored \S+jws-signed-form\.json$/m,
    );
    expect(r.stdout).toMatch(/^ {2}\d+ vCon\(s\) without a uuid got one derived from their content/m);
    expect(r.stdout).toMatch(/invalid__conserver__bad_party_ref\.json: validation_failed: /);
    expect(r.stderr).toMatch(/\d+ vCon\(s\) rejected/);
  });

  test('a file without a uuid is stored under the name-based uuid of its canonical JSON, whatever its key order', async () => {
    const dir = path.join(ws.dir, 'nouuid');
    mkdirSync(dir);
    const vcon = {
      vcon: '0.3.0',
      subject: 'Billing Dispute (no uuid)',
      parties: [{ name: 'Ann', tel: '+15551230000' }],
      created_at: '2025-02-01T10:00:00Z',
    };
    writeFileSync(path.join(dir, 'a.json'), JSON.stringify(vcon));
    const first = JSON.parse((await ws.run(['import', '--group', 'imp', dir, '--json'])).stdout);
    const uuid = contentUuid(vcon);
    expect(first.outcomes).toEqual([{ source: path.join(dir, 'a.json'), outcome: 'stored', uuid }]);
    // The same vCon with its keys in another order is the same content: replaced, not copied.
    writeFileSync(
      path.join(dir, 'a.json'),
      JSON.stringify({ created_at: vcon.created_at, parties: vcon.parties, subject: vcon.subject, vcon: '0.3.0' }),
    );
    const again = JSON.parse((await ws.run(['import', '--group', 'imp', dir, '--json'])).stdout);
    expect(again).toMatchObject({ stored: 0, replaced: 1, derived_uuids: 1 });
    // Stored under that uuid, and the rest of the document as the file had it.
    const started = await ws.run(['start', '--group', 'imp', '--detach']);
    expect(started.exitCode, started.stderr).toBe(0);
    try {
      const got = await api(`${ws.registry().imp.url}/api/v1`, `/vcons/${uuid}`);
      expect(got.body.vcon).toMatchObject({ uuid, subject: vcon.subject, parties: vcon.parties });
      const listed = await api(`${ws.registry().imp.url}/api/v1`, `/vcons?subject=${encodeURIComponent('Billing Dispute (no uuid)')}`);
      expect(listed.body.data).toHaveLength(1);
    } finally {
      await ws.run(['stop', '--all']);
    }
  }, 120_000);

  test('reads the given tree only: links out of it are not followed, and no rejection quotes a file', async () => {
    // Another group's credentials file and a directory outside the tree, linked into it.
    const outside = path.join(ws.dir, 'outside');
    mkdirSync(path.join(outside, 'sub'), { recursive: true });
    writeFileSync(path.join(outside, 'beta.json'), JSON.stringify({ DATABASE_URL: 'postgres://vcon_beta:s3cret-beta@db/x' }));
    writeFileSync(path.join(outside, 'sub', 'c.json'), JSON.stringify({ subject: 'outside the tree' }));
    const dir = path.join(ws.dir, 'tree');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'a.json'), JSON.stringify({ vcon: '0.3.0', uuid: '0195a1c2-0000-4000-8000-00000000a11c', subject: 'inside' }));
    symlinkSync(path.join(outside, 'beta.json'), path.join(dir, 'creds.json'));
    symlinkSync(path.join(outside, 'sub'), path.join(dir, 'linked'));
    writeFileSync(path.join(dir, 'passwd.json'), 'root:x:0:0:root:/root:/bin/bash\n');
    writeFileSync(path.join(dir, 'huge.json'), '{"subject":"n",\n "attachments":[{"body":{"n":1e400}}]}');
    writeFileSync(path.join(dir, 'twice.json'), '{"subject":"first",\n "parties":[{"name":"a"}],"subject":"second"}');
    const r = await ws.run(['import', '--group', 'imp', dir, '--json']);
    const report = JSON.parse(r.stdout);
    expect(report.outcomes.map((o: any) => [path.basename(o.source), o.outcome]).sort()).toEqual([
      ['a.json', 'stored'],
      ['huge.json', 'rejected'],
      ['passwd.json', 'rejected'],
      ['twice.json', 'rejected'],
    ]);
    expect(report.ignored).toEqual([
      { path: path.join(dir, 'creds.json'), reason: expect.stringMatching(/^a symbolic link \(not followed/) },
      { path: path.join(dir, 'linked'), reason: expect.stringMatching(/^a symbolic link \(not followed/) },
    ]);
    const reasons = Object.fromEntries(report.outcomes.map((o: any) => [path.basename(o.source), o.reason]));
    expect(reasons['passwd.json']).toBe('invalid_json: the file is not JSON (line 1, column 1)');
    expect(reasons['huge.json']).toMatch(/^validation_failed: Invalid file: attachments\[0\]\.body\.n: number 1e400 is outside the range/);
    expect(reasons['twice.json']).toMatch(/^validation_failed: Invalid file: subject: field name "subject" appears more than once/);
    // For people: the links are named, and nothing of any file's content is shown.
    const human = await ws.run(['import', '--group', 'imp', dir]);
    expect(human.stdout).toMatch(/^ {2}ignored {2}2 \(symbolic links and special files under the given directories are not read\)$/m);
    expect(human.stdout).toMatch(/creds\.json: a symbolic link/);
    for (const out of [r.stdout, r.stderr, human.stdout, human.stderr]) expect(out).not.toMatch(/root:x|s3cret|outside the tree/);
  }, 60_000);
});

describe('vcon-launch import, indexing behind', () => {
  // The group's embedding endpoint refuses: every imported vCon stays queued for indexing, so the
  // report's count is known.
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['slow'], { slow: { EMBEDDINGS_PROVIDER: 'openai', EMBEDDINGS_URL: 'http://127.0.0.1:9/v1' } });
  });
  afterAll(() => ws?.cleanup());

  test('says how many vCons are readable but not yet searchable, and who indexes them', async () => {
    const dir = path.join(ws.dir, 'three');
    mkdirSync(dir);
    for (let i = 0; i < 3; i++) {
      writeFileSync(
        path.join(dir, `${i}.json`),
        JSON.stringify({ vcon: '0.3.0', subject: `queued ${i}`, created_at: '2025-03-01T10:00:00Z', parties: [{ name: 'Ann' }] }),
      );
    }
    const json = JSON.parse((await ws.run(['import', '--group', 'slow', dir, '--json'])).stdout);
    expect(json).toMatchObject({ stored: 3, pending_index: 3, running: false });
    // Whom the temporary instance ran as, by its own report (the group's user under a root launcher).
    expect(json.temporary_instance_user).toEqual({ user: expect.any(String), uid: process.getuid!() === 0 ? expect.any(Number) : process.getuid!() });
    writeFileSync(
      path.join(dir, '3.json'),
      JSON.stringify({ vcon: '0.3.0', subject: 'queued 3', created_at: '2025-03-01T10:00:00Z', parties: [{ name: 'Bo' }] }),
    );
    const r = await ws.run(['import', '--group', 'slow', dir]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^ {2}4 vCon\(s\) queued for search indexing: readable now, searchable once the group's server has indexed them \(`vcon-launch start --group slow` does it/m,
    );
  });
});

describe('vcon-launch import into a lenient group', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['len'], { len: { VCON_VALIDATION: 'lenient' } });
  });
  afterAll(() => ws?.cleanup());

  test('stores the slips, counts and lists their warnings, and files a uuid-less slip under its content uuid', async () => {
    const dir = path.join(ws.dir, 'slips');
    mkdirSync(dir);
    const rfc2822 = 'py-vcon__pre-0.0.1-rfc2822-start-no-uuid.json';
    for (const f of [rfc2822, 'ietf-meeting__video-dialog-type-url-slides.json', 'vcon-mcp__text-0.0.1-intent-analysis.json']) {
      writeFileSync(path.join(dir, f), readFileSync(path.join(FIXTURES, f)));
    }
    const json = JSON.parse((await ws.run(['import', '--group', 'len', dir, '--json'])).stdout);
    expect(json).toMatchObject({ stored: 2, rejected: 1, with_warnings: 2, derived_uuids: 1 });
    const byFile = Object.fromEntries(json.outcomes.map((o: any) => [path.basename(o.source), o]));
    expect(byFile[rfc2822].uuid).toBe(contentUuid(JSON.parse(readFileSync(path.join(FIXTURES, rfc2822), 'utf8'))));
    expect(byFile[rfc2822].warnings).toEqual([{ path: 'dialog[0].start', message: 'is an RFC 2822 date: read as 2022-05-18T23:05:05.000Z' }]);
    const r = await ws.run(['import', '--group', 'len', dir]);
    expect(r.stdout).toMatch(/^ {2}2 stored vCon\(s\) with validation warnings/m);
    expect(r.stdout).toMatch(/^ {4}\S+video-dialog-type-url-slides\.json: dialog\[0\]\.type: "video" is not a vCon dialog type: stored as sent$/m);
    expect(r.stdout).toMatch(/intent-analysis\.json: validation_failed: .*uuid/);
  });
});

describe('content uuid', () => {
  test("is RFC 9562 version 5 (the RFC's DNS example) over key-sorted JSON", () => {
    expect(uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
    expect(canonicalJson({ b: [2, { d: 1, c: null }], a: 'x' })).toBe('{"a":"x","b":[2,{"c":null,"d":1}]}');
    expect(contentUuid({ a: 1, b: 2 })).toBe(contentUuid({ b: 2, a: 1 }));
    expect(contentUuid({ a: 1 })).not.toBe(contentUuid({ a: 2 }));
  });
});
