// vcon-server with no DATABASE_URL owns an embedded PostgreSQL. Killing the owner with SIGKILL
// under a write load leaves the postmaster behind: the next start adopts it. Killing the
// postmaster as well leaves a stale postmaster.pid: the next start recovers the cluster.
// Either way every acknowledged write is there afterwards.
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../src/process.js';
import { waitFor } from '../helpers/poll.js';
import { pgCtl, request, sampleVcon, spawnServer, type ServerProcess } from './helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'vcon-embedded-owner-'));
// As root the cluster runs as `postgres`, which must be able to reach the data directory.
chmodSync(dir, 0o711);
const pgdata = path.join(dir, 'embedded', 'pgdata');
const env = { VCON_DATA_DIR: dir, SUPABASE_DB_SCHEMA: 'hard_embedded', EMBEDDINGS_PROVIDER: 'hashing' };
const postmasterPid = () => Number(readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
let last: ServerProcess | undefined;

afterAll(async () => {
  if (last && last.proc.exitCode === null) {
    last.proc.kill('SIGTERM');
    await last.proc;
  }
  await pgCtl(['stop', '-D', pgdata, '-m', 'immediate', '-w']).catch(() => undefined);
  if (!process.env.KEEP_HARDENING_DIRS) rmSync(dir, { recursive: true, force: true });
});

/**
 * Writes until `n` writes are acknowledged (a count, not a time a loaded machine stretches), then
 * SIGKILLs the server while writes are still in flight; returns the acknowledged uuids.
 */
async function writeThenKill(server: ServerProcess, n: number): Promise<string[]> {
  const acked: string[] = [];
  let running = true;
  const writer = async () => {
    while (running) {
      const doc = sampleVcon(randomUUID());
      const o = await request(`${server.base}/vcons`, { method: 'POST', json: doc, timeoutMs: 10_000 });
      if (o.status === 201) acked.push(doc.uuid);
    }
  };
  const load = Promise.all(Array.from({ length: 8 }, writer));
  await waitFor(() => acked.length >= n || server.proc.exitCode !== null, 120_000, 20, `${n} acknowledged writes`);
  server.proc.kill('SIGKILL');
  await server.proc;
  running = false;
  await load;
  return acked;
}

async function presentAfterStart(acked: string[]) {
  const t0 = Date.now();
  last = await spawnServer(env);
  const startMs = Date.now() - t0;
  const missing: string[] = [];
  for (const u of acked) if ((await request(`${last.base}/vcons/${u}?format=metadata`)).status !== 200) missing.push(u);
  const health = await request(`${last.base}/health`);
  return { startMs, missing, health };
}

describe("the embedded database's owner killed", () => {
  it('SIGKILL of the owner: the next start adopts the orphaned postmaster, nothing acknowledged is lost', async () => {
    const first = await spawnServer(env, 120_000);
    const pm = postmasterPid();
    const acked = await writeThenKill(first, 50);
    expect(isAlive(pm)).toBe(true); // the orphan
    const r = await presentAfterStart(acked);
    console.log(
      `[hardening] embedded owner SIGKILL: acknowledged ${acked.length}, missing ${r.missing.length}, next start ${r.startMs} ms (orphan adopted: ${postmasterPid() === pm})`,
    );
    expect(acked.length).toBeGreaterThan(0);
    expect(r.health.status).toBe(200);
    expect(r.missing).toEqual([]);
    expect(postmasterPid()).toBe(pm);
    expect(last!.stderr()).toMatch(/adopting an orphaned embedded PostgreSQL/);
  });

  it('SIGKILL of the owner and of the postmaster: the next start recovers the cluster, nothing acknowledged is lost', async () => {
    const pm = postmasterPid();
    const acked = await writeThenKill(last!, 50);
    process.kill(pm, 'SIGKILL');
    // PostgreSQL refuses to start while the pid in postmaster.pid exists, and a killed postmaster
    // stays a zombie until init reaps it (immediate under systemd or tini, slower under some
    // sandboxes' pid 1, never under an init that doesn't reap): wait for the reaping.
    const reaped = () => {
      try {
        process.kill(pm, 0);
        return false;
      } catch {
        return true;
      }
    };
    await waitFor(reaped, 60_000, 50, `postmaster ${pm} to be reaped by init`);
    expect(isAlive(pm)).toBe(false);
    const r = await presentAfterStart(acked);
    console.log(
      `[hardening] embedded owner + postmaster SIGKILL: acknowledged ${acked.length}, missing ${r.missing.length}, next start ${r.startMs} ms`,
    );
    expect(acked.length).toBeGreaterThan(0);
    expect(r.health.status).toBe(200);
    expect(r.missing).toEqual([]);
    expect(postmasterPid()).not.toBe(pm);
  });
});
