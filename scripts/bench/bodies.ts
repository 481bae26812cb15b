// Large bodies at once: 50 concurrent creates of a 14 MB vCon (one inline recording) against one
// server started as the launcher starts a group (its heap ceiling, BODY_IN_FLIGHT_LIMIT), then the
// process's peak and settled RSS. Unbounded, this burst took a process from 256 MB to 2,718 MB and
// left it at 2,150 MB; the goal is the exported container limit (VCON_MEMORY_LIMIT, 512 MB).
import { setTimeout as sleep } from 'node:timers/promises';
import { benchAuth, readRssMb, startServer } from './processes.js';
import { makeFigure, type Figure } from './stats.js';

const RECORDING_BYTES = 14 * 1024 * 1024;

export async function measureBodies(opts: {
  databaseUrl: string;
  schema: string;
  runDir: string;
  concurrent: number;
  log: (msg: string) => void;
}): Promise<Figure[]> {
  const server = await startServer({ name: 'bodies', databaseUrl: opts.databaseUrl, schema: opts.schema, runDir: opts.runDir, logLevel: 'warn' });
  try {
    const api = `${server.url}/api/v1`;
    await sleep(1_000);
    const idle = readRssMb(server.pid);
    const body = JSON.stringify({
      vcon: '0.3.0',
      subject: 'large body',
      parties: [{ name: 'Ann' }],
      dialog: [{ type: 'recording', start: '2025-01-01T10:00:00Z', parties: [0], encoding: 'base64url', body: 'A'.repeat(RECORDING_BYTES) }],
    });
    const statuses = await Promise.all(
      Array.from({ length: opts.concurrent }, () =>
        fetch(`${api}/vcons`, { method: 'POST', headers: { ...benchAuth, 'content-type': 'application/json' }, body }).then(
          async (r) => (await r.arrayBuffer(), r.status),
          () => 0,
        ),
      ),
    );
    const answered = readRssMb(server.pid);
    // Indexing of the stored vCons goes on after their answers: the peak is read after it settles.
    await sleep(5_000);
    const settled = readRssMb(server.pid);
    const peak = readRssMb(server.pid, 'VmHWM');
    const health = (await (await fetch(`${api}/health`)).json()) as { bodies?: { peak: number; refused: number; limit: number } };
    const count = (s: number) => statuses.filter((x) => x === s).length;
    const note =
      `${opts.concurrent} concurrent creates of ${(Buffer.byteLength(body) / 1024 ** 2).toFixed(1)} MB: ${count(201)} stored, ` +
      `${count(503)} refused 503, ${statuses.length - count(201) - count(503)} other; idle ${idle.toFixed(0)} MB` +
      (health.bodies
        ? `; bodies in flight peak ${(health.bodies.peak / 1024 ** 2).toFixed(0)} of ${(health.bodies.limit / 1024 ** 2).toFixed(0)} MB`
        : '');
    opts.log(`  ${note}; RSS ${answered.toFixed(0)} MB when all were answered, peak ${peak.toFixed(0)} MB, settled ${settled.toFixed(0)} MB`);
    return [
      makeFigure({
        id: 'bodies.peak_rss',
        label: `peak RSS under ${opts.concurrent} concurrent 14 MB creates`,
        unit: 'MB',
        better: 'lower',
        rounds: [peak],
        goal: { kind: 'max', value: 512 },
        note,
      }),
      makeFigure({
        id: 'bodies.settled_rss',
        label: 'RSS 5 s after that burst',
        unit: 'MB',
        better: 'lower',
        rounds: [settled],
        goal: { kind: 'max', value: 512 },
      }),
    ];
  } finally {
    await server.stop();
  }
}
