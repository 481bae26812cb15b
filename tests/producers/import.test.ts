// `vcon-launch import` of the public producers' files (tests/fixtures/producers) into a group of each
// validation mode gives every file the verdict POST gives it (verdicts.tsv, checked over REST by
// producers.test.ts): stored or replaced with the same warning paths, or rejected naming the same
// paths. Files that share a uuid go in separate imports, since one import sends only the last.
import { copyFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorkspace, type Workspace } from '../launcher/helpers.js';
import { loadProducers, MODES, PRODUCERS_DIR } from './table.js';

const files = loadProducers();
/** Ceilings for a hang, not speed bounds: each round starts a temporary server, slow on a loaded machine. */
const IMPORT_CEILING_MS = 600_000;
const ROUNDS_CEILING_MS = 1_800_000;

describe('vcon-launch import of the public producers', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(
      MODES.map((m) => `p${m}`),
      Object.fromEntries(MODES.map((m) => [`p${m}`, { VCON_VALIDATION: m }])),
    );
  });
  afterAll(() => ws?.cleanup());

  for (const mode of MODES) {
    test(
      `in ${mode} mode, every file gets POST's verdict`,
      async () => {
        const outcomes = new Map<string, any>();
        let pending = files.map((f) => f.file);
        for (let round = 0; pending.length > 0; round++) {
          const dir = path.join(ws.dir, `${mode}-${round}`);
          for (const f of pending) {
            mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
            copyFileSync(path.join(PRODUCERS_DIR, f), path.join(dir, f));
          }
          const r = await ws.run(['import', '--group', `p${mode}`, dir, '--json'], { timeout: IMPORT_CEILING_MS });
          expect(r.stdout, r.stderr).toMatch(/^\{/);
          const skipped: string[] = [];
          for (const o of JSON.parse(r.stdout).outcomes) {
            const file = path.relative(dir, path.resolve(ws.dir, o.source)).split(path.sep).join('/');
            if (o.outcome === 'skipped') skipped.push(file);
            else outcomes.set(file, o);
          }
          expect(skipped.length, `round ${round} sent nothing`).toBeLessThan(pending.length);
          pending = skipped;
        }
        for (const f of files) {
          const v = f.verdict[mode];
          const o = outcomes.get(f.file);
          expect(o, f.file).toBeDefined();
          if (v.kind === 'accepted') {
            expect(['stored', 'replaced'], `${f.file}: ${o.reason}`).toContain(o.outcome);
            expect(
              (o.warnings ?? []).map((w: any) => w.path),
              f.file,
            ).toEqual(v.warnings);
          } else {
            expect(o.outcome, f.file).toBe('rejected');
            if (v.kind === 'unreadable') expect(o.reason, f.file).toMatch(/^invalid_json: /);
            else for (const p of v.paths) expect(o.reason, f.file).toContain(p);
          }
        }
      },
      ROUNDS_CEILING_MS,
    );
  }
});
