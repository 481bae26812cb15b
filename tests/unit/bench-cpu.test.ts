// The bench's CPU budget (scripts/bench/processes.ts): a real process whose niced worker thread
// stands for the index thread, read from /proc.
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { cpuMark, cpuParts } from '../../scripts/bench/processes.js';

// Main thread spins ~300 ms, a worker that lowers its own priority (as src/index-thread.ts does)
// spins ~700 ms, then the process waits to be measured.
const CHILD = `
const { Worker } = require('node:worker_threads');
const spin = (ms) => { const end = Date.now() + ms; while (Date.now() < end); };
const w = new Worker("require('node:os').setPriority(0, 7); const end = Date.now() + 700; while (Date.now() < end); require('node:worker_threads').parentPort.postMessage('done'); setInterval(() => {}, 1000);", { eval: true });
w.once('message', () => { spin(300); process.stdout.write('ready\\n'); });
setInterval(() => {}, 1000);
`;

describe.skipIf(process.platform !== 'linux')('bench CPU budget', () => {
  it('splits a process into its main thread, its niced (index) thread and the rest', async () => {
    const child = execa(process.execPath, ['-e', CHILD], { reject: false });
    try {
      const start = await cpuMark(child.pid!, async () => []);
      await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve()));
      const end = await cpuMark(child.pid!, async () => []);
      const parts = cpuParts(start, end, child.pid!, 1);
      // Clock ticks are 10 ms and the machine may be shared: generous bounds, but each part in its place.
      expect(parts.index).toBeGreaterThan(450);
      expect(parts.index).toBeLessThan(1_000);
      expect(parts.main).toBeGreaterThan(200);
      expect(parts.main).toBeLessThan(parts.index);
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
