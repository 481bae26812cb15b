// Stable URLs: a group that was given "any free port" keeps the port it got, across its
// supervisor's restarts and across stop/start, as long as nothing else has taken it meanwhile.
import { createServer } from 'node:net';
import type { Child, SpawnOptions } from './child.js';
import type { GroupSpec } from './groups.js';

/** Whether host:port can be bound right now (a listener that cannot bind means someone has it). */
export function portIsFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * The child environment to spawn with: the remembered port when the group asks for any free port
 * and that port is free now; the group's own setting otherwise. A fixed MCP_HTTP_PORT always wins.
 */
async function envWithStablePort(spec: GroupSpec, env: Record<string, string>, port: number | undefined): Promise<Record<string, string>> {
  if (spec.config.mcp.port !== 0 || port === undefined) return env;
  if (!(await portIsFree(spec.config.mcp.host, port))) return env;
  return { ...env, MCP_HTTP_PORT: String(port) };
}

/**
 * Spawns a group on the port it had before when that port is free, else as its file says. If the
 * port was taken between the probe and the child's listen (by another group of the same start),
 * the group gets any free port instead of failing.
 */
export async function spawnKeepingPort(
  spec: GroupSpec,
  opts: SpawnOptions,
  port: number | undefined,
  spawn: (opts: SpawnOptions) => Promise<Child>,
): Promise<Child> {
  const env = await envWithStablePort(spec, opts.env, port);
  if (env === opts.env) return spawn(opts);
  try {
    return await spawn({ ...opts, env });
  } catch (err) {
    if (await portIsFree(spec.config.mcp.host, port!)) throw err;
    return spawn(opts);
  }
}
