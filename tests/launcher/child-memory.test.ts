// The memory and GC settings every group's process starts with (many groups per machine, CPU per write): a small young
// generation, single-threaded GC and two malloc arenas, each unless the operator's environment says
// otherwise (where Node lets it). Read from the running processes themselves (/proc), as an
// operator would check them.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorkspace, type Workspace } from './helpers.js';

const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
const argv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');

describe('memory settings of a group process', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['plain', 'tuned'], {
      tuned: { MALLOC_ARENA_MAX: '4', NODE_OPTIONS: '--max-semi-space-size=8 --max-old-space-size=300', VCON_MEMORY_LIMIT: '1gb' },
    });
  });
  afterAll(async () => {
    await ws?.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('two malloc arenas, a 2 MB semi-space, single-threaded GC and a heap ceiling by default; an operator setting wins where NODE_OPTIONS may set it', async () => {
    const r = await ws.run(['start', '--all', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    const reg = ws.registry();
    expect(environ(reg.plain.pid)).toContain('MALLOC_ARENA_MAX=2');
    expect(argv(reg.plain.pid)).toContain('--max-semi-space-size=2');
    expect(argv(reg.plain.pid)).toContain('--single-threaded-gc');
    // The heap ceiling: three quarters of VCON_MEMORY_LIMIT (512 MB by default) less the index
    // thread's fifth of it (76 MiB), unless NODE_OPTIONS sets one.
    expect(argv(reg.plain.pid)).toContain('--max-old-space-size=308');
    expect(argv(reg.tuned.pid).filter((a) => a.startsWith('--max-old-space-size'))).toEqual([]);
    expect(environ(reg.tuned.pid)).toContain('MALLOC_ARENA_MAX=4');
    expect(environ(reg.tuned.pid)).not.toContain('MALLOC_ARENA_MAX=2');
    expect(argv(reg.tuned.pid)).not.toContain('--max-semi-space-size=2');
    expect(argv(reg.tuned.pid)).toContain('--single-threaded-gc');
  });
});
