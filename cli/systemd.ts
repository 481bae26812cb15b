// `export --target systemd`: for hosts where the init system supervises. One unit per group that
// runs the same server process `start` would (same node flags and environment defaults), with the
// group's environment in a file of its own, restarted by systemd when it fails.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../src/paths.js';
import { childEnvDefaults, childNodeFlags, serverEntry } from './child.js';
import { createCredentialStore } from './credentials.js';
import type { LauncherEnvironment } from './environment.js';
import { loadGroups, resolveDir, selectGroupNames, type GroupSpec } from './groups.js';
import type { GroupFlags } from './options.js';
import { note } from './output.js';
import { groupUsersEnabled, installUnreachableByOthers, osUserName } from './os-users.js';
import { createRegistry } from './registry.js';
import { ownIdentity, resourceName } from './commands/export.js';

/** A value as systemd's EnvironmentFile reads it: bare when plain, else quoted (no expansion inside single quotes). */
export function envFileValue(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]*$/.test(value)) return value;
  if (!value.includes("'") && !/[\n\\]/.test(value)) return `'${value}'`;
  return `"${value.replace(/[\\"$`]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`;
}

/** An ExecStart= word: quoted when it holds spaces or quotes; `%` and `$` are systemd specifiers/expansions. */
const execWord = (w: string) => {
  const escaped = w.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  return /[\s"'\\]/.test(escaped) ? `"${escaped.replace(/[\\"]/g, (c) => `\\${c}`)}"` : escaped;
};

/** The unit of one group. */
export function systemdUnit(spec: GroupSpec, opts: { envFile: string; user?: string; execStart: string[]; stopTimeoutS: number }): string {
  return [
    '[Unit]',
    `Description=vCon server of group ${spec.name} (written by vcon-launch export)`,
    'Wants=network-online.target',
    'After=network-online.target postgresql.service',
    // Within 60 s at most 10 restarts, then the unit is failed (as the launcher's supervisor gives up).
    'StartLimitIntervalSec=60',
    'StartLimitBurst=10',
    '',
    '[Service]',
    'Type=simple',
    `EnvironmentFile=${opts.envFile}`,
    `WorkingDirectory=${packageRoot}`,
    `ExecStart=${opts.execStart.map(execWord).join(' ')}`,
    ...(opts.user ? [`User=${opts.user}`, `Group=${opts.user}`] : []),
    // A crash is restarted; a clean exit (systemctl stop, or the server's own graceful stop) is not.
    'Restart=on-failure',
    'RestartSec=1',
    'KillSignal=SIGTERM',
    `TimeoutStopSec=${opts.stopTimeoutS}`,
    'NoNewPrivileges=yes',
    'PrivateTmp=yes',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

/** Writes <out>/vcon-<group>.service and <out>/vcon-<group>.env per group; returns the paths written. */
export function exportSystemd(
  opts: GroupFlags & { out?: string; instancesDir?: string },
  launcher: Pick<LauncherEnvironment, 'databaseUrl' | 'groupUsers'>,
  cwd = process.cwd(),
): string[] {
  const envDir = resolveDir(opts.envDir, cwd);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const instancesDir = resolveDir(opts.instancesDir ?? 'instances', cwd);
  const store = createCredentialStore(instancesDir);
  const registry = createRegistry(instancesDir);
  const out = resolveDir(opts.out ?? path.join('deploy', 'systemd'), cwd);
  mkdirSync(out, { recursive: true });
  // The same rule as start: each group as its own OS user when group users are on (as root by default).
  const ownUsers = groupUsersEnabled(launcher, undefined, () => installUnreachableByOthers(packageRoot));
  const written: string[] = [];
  for (const spec of specs) {
    const name = resourceName(spec.name);
    const identity = ownIdentity(spec, store);
    if (!identity && spec.databaseUrl)
      note(`group ${spec.name}: no role of its own yet (run start or provision first): the unit connects as the env file's user`);
    if (!spec.databaseUrl) note(`group ${spec.name}: no DATABASE_URL: the unit's server runs its own embedded database in ${spec.config.dataDir}`);
    const env: Record<string, string> = childEnvDefaults({ ...spec.env, ...(identity ?? {}) });
    env.MCP_TRANSPORT = 'http';
    // A unit has no launcher to tell it its port: the port the group had, else a fixed one is needed.
    if (spec.config.mcp.port === 0) {
      const last = registry.lastPort(spec.name);
      if (last) env.MCP_HTTP_PORT = String(last);
      else note(`group ${spec.name}: MCP_HTTP_PORT is 0, so its unit listens on a new free port at each start; set a fixed port in ${spec.envFile}`);
    }
    if (spec.config.replicas > 1) note(`group ${spec.name}: VCON_REPLICAS=${spec.config.replicas} is not exported: its unit runs one process`);
    delete env.VCON_REPLICAS;
    const envFile = path.join(out, `${name}.env`);
    const unitFile = path.join(out, `${name}.service`);
    const body = Object.entries(env)
      .map(([k, v]) => `${k}=${envFileValue(v)}`)
      .join('\n');
    // It holds keys and passwords: its owner (root, who reads it for systemd) alone.
    writeFileSync(envFile, `# Environment of group ${spec.name}, written by vcon-launch export; keep it private.\n${body}\n`, { mode: 0o600 });
    chmodSync(envFile, 0o600);
    const execStart = [process.execPath, ...childNodeFlags(env), serverEntry()];
    const stopTimeoutS = Math.ceil(spec.config.shutdownTimeoutMs / 1000) + 5;
    writeFileSync(unitFile, systemdUnit(spec, { envFile, user: ownUsers ? osUserName(spec.name) : undefined, execStart, stopTimeoutS }));
    written.push(unitFile, envFile);
  }
  return written;
}
