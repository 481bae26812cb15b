// The bench's CPU budget (scripts/bench/processes.ts): a real process whose niced worker thread
// stands for the index thread, read from /proc.
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { cpuMark, cpuParts } from '../../scripts/bench/processes.js';
import { waitFor } from '../helpers/poll.js';

// The child's worker lowers its own priority (as src/index-thread.ts does) and, once told to go,
// spins 700 ms of its own CPU time; then the main thread spins 300 ms of its own. Each spins on
// its thread's CPU clock (/proc/thread-self/stat), not the wall clock: on a loaded machine a spin
// by wall time gets a fraction of the CPU it asks for.
const CHILD = `
const { readFileSync } = require('node:fs');
const { Worker } = require('node:worker_threads');
globalThis.spinCpu = (ms) => {
  const ticks = () => { const f = readFileSync('/proc/thread-self/stat', 'utf8'); const p = f.slice(f.lastIndexOf(')') + 2).split(' '); return Number(p[11]) + Number(p[12]); };
  const end = ticks() + ms / 10;
  while (ticks() < end);
};
const w = new Worker("require('node:os').setPriority(0, 7); const { readFileSync } = require('node:fs'); const { parentPort } = require('node:worker_threads'); parentPort.once('message', () => { (" + globalThis.spinCpu.toString() + ")(700); parentPort.postMessage('done'); setInterval(() => {}, 1000); }); parentPort.postMessage('niced');", { eval: true });
w.once('message', () => {
  process.stdout.write('set\\n');
  process.stdin.once('data', () => w.postMessage('go'));
  w.once('message', () => { globalThis.spinCpu(300); process.stdout.write('ready\\n'); });
});
setInterval(() => {}, 1000);
`;

describe.skipIf(process.platform !== 'linux')('bench CPU budget', () => {
  it('splits a process into its main thread, its niced (index) thread and the rest', async () => {
    const child = execa(process.execPath, ['-e', CHILD], { reject: false, stdin: 'pipe' });
    try {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      const said = (word: string) => waitFor(() => out.includes(word), 60_000, 10, `the child to say ${word}`);
      // The first mark is taken once the worker is niced and idle: only the spins fall between the marks.
      await said('set');
      const start = await cpuMark(child.pid!, async () => []);
      child.stdin!.write('go\n');
      await said('ready');
      const end = await cpuMark(child.pid!, async () => []);
      const parts = cpuParts(start, end, child.pid!, 1);
      // The spins are CPU time, so the parts hold on a loaded machine too; clock ticks are 10 ms,
      // and each thread does a little besides its spin (messages, the marks' reads).
      expect(parts.index).toBeGreaterThanOrEqual(700);
      expect(parts.index).toBeLessThan(900);
      expect(parts.main).toBeGreaterThanOrEqual(300);
      expect(parts.main).toBeLessThan(500);
      // No database backends listed: the PostgreSQL part is unknown, not zero.
      expect(parts.pg).toBeNaN();
      // Per 100 vCons: the same parts divided.
      expect(cpuParts(start, end, child.pid!, 10).index).toBeCloseTo(parts.index / 10, 5);
    } finally {
      child.kill('SIGKILL');
      await child;
    }
  });
});
