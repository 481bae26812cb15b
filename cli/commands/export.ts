// vcon-launch export: deployment units for Kubernetes or Compose from the same env files `start`
// reads, validated by the same loader (same messages). Nothing is built or applied here.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroups, resolveDir, selectGroupNames, type GroupSpec } from '../groups.js';
import { addGroupFlags, type GroupFlags } from '../options.js';
import { note } from '../output.js';
import { getBuildInfo } from '../../src/version.js';
import { heapLimitMiB } from '../../src/config.js';

export type ExportTarget = 'kubernetes' | 'compose';

export interface ExportOptions extends GroupFlags {
  target: string;
  out?: string;
}

/** The port the server listens on inside a container when the env file leaves it to the OS (0). */
export const CONTAINER_PORT = 3000;
/** Variables that go into the Kubernetes Secret rather than the Deployment's plain env. */
const SECRET_VARIABLES = new Set([
  'API_KEYS',
  'API_KEYS_READONLY',
  'DATABASE_URL',
  'SUPABASE_DB_URL',
  'DATABASE_PASSWORD',
  'ANALYZE_DATABASE_PASSWORD',
  'EMBEDDINGS_API_KEY',
]);
/**
 * Memory from the bench (tests/bench/results, busy machine): one instance idles at ~92 MB RSS and
 * holds ~243 MB after 100,000 vCons and searches (word vectors loaded). The request covers the
 * loaded figure; the limit leaves room for large bodies (REST_API_BODY_LIMIT 20mb, parsed) and GC.
 */
export const MEMORY_REQUEST = '256Mi';
/** The container's memory limit in MiB: the group's VCON_MEMORY_LIMIT, the ceiling the launcher gives its process too. */
const memoryMiB = (spec: GroupSpec) => Math.floor(spec.config.limits.memory / 1024 ** 2);
/** The heap limit the launcher gives a child, for the container's node (an operator's own NODE_OPTIONS wins). */
const nodeOptionsOf = (spec: GroupSpec, env: Record<string, string>) =>
  /max-old-space-size/.test(env.NODE_OPTIONS ?? '')
    ? env.NODE_OPTIONS
    : `${env.NODE_OPTIONS ?? ''} --max-old-space-size=${heapLimitMiB(spec.config.limits.memory)}`.trim();
/** Seconds the pod gets beyond the server's own drain budget (SIGTERM → close → exit). */
const GRACE_MARGIN_S = 5;
/** The database URL a group without one gets in Compose: the shared PostgreSQL service. */
const COMPOSE_DATABASE_URL = 'postgres://vcon:${POSTGRES_PASSWORD:-vcon}@postgres:5432/vcon';
/** A placeholder for Kubernetes groups whose env file names no database a pod could reach. */
const KUBERNETES_DATABASE_PLACEHOLDER = 'postgres://vcon:CHANGE_ME@postgres:5432/vcon';

const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|\[?::1\]?)$/i;

/** Whether a URL names a database a container could reach (not missing, not this machine's loopback). */
function reachableFromContainer(url: string | undefined): boolean {
  if (!url) return false;
  try {
    return !LOOPBACK.test(new URL(url).hostname);
  } catch {
    return false;
  }
}

/** A DNS-1123 label from a group name (letters, digits, _ and . allowed there; Kubernetes takes a-z0-9-). */
export function resourceName(group: string): string {
  const base = group
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return `vcon-${base || 'group'}`.slice(0, 63).replace(/-+$/, '');
}

/** The image tag manifests refer to (built from the repository's Dockerfile). */
export const imageOf = () => `vcon-launch:${getBuildInfo().version}`;

/** The container's environment: the group's, listening on all interfaces at a fixed port. */
function containerEnv(spec: GroupSpec): { env: Record<string, string>; port: number; databaseFromFile: boolean } {
  const env = { ...spec.env };
  const port = spec.config.mcp.port || CONTAINER_PORT;
  env.MCP_TRANSPORT = 'http';
  env.MCP_HTTP_HOST = '0.0.0.0';
  env.NODE_OPTIONS = nodeOptionsOf(spec, env);
  env.MCP_HTTP_PORT = String(port);
  // Paths of this machine mean nothing in an image; the image's default data directory is used.
  delete env.VCON_DATA_DIR;
  // Read by the launcher and by the orchestrator (replicas), not by the server.
  delete env.VCON_REPLICAS;
  const databaseFromFile = reachableFromContainer(spec.config.db.url);
  if (!databaseFromFile) {
    delete env.DATABASE_URL;
    delete env.SUPABASE_DB_URL;
  }
  return { env, port, databaseFromFile };
}

const healthPath = (spec: GroupSpec) => `${spec.config.rest.basePath}/health`;
const gracePeriod = (spec: GroupSpec) => Math.ceil(spec.config.shutdownTimeoutMs / 1000) + GRACE_MARGIN_S;

/** Secret, Deployment and Service of one group, as plain Kubernetes objects. */
export function kubernetesObjects(spec: GroupSpec): Record<string, unknown>[] {
  const name = resourceName(spec.name);
  const labels = { 'app.kubernetes.io/name': 'vcon-launch', 'app.kubernetes.io/instance': name, 'vcon-launch/group': spec.name };
  const selector = { 'app.kubernetes.io/name': 'vcon-launch', 'app.kubernetes.io/instance': name };
  const { env, port, databaseFromFile } = containerEnv(spec);
  const secret: Record<string, string> = {};
  const plain: { name: string; value: string }[] = [];
  for (const [k, v] of Object.entries(env).sort(([a], [b]) => a.localeCompare(b))) {
    if (SECRET_VARIABLES.has(k)) secret[k] = v;
    else plain.push({ name: k, value: v });
  }
  if (!databaseFromFile) secret.DATABASE_URL = KUBERNETES_DATABASE_PLACEHOLDER;
  const probe = { httpGet: { path: healthPath(spec), port: 'http' } };
  return [
    { apiVersion: 'v1', kind: 'Secret', metadata: { name, labels }, type: 'Opaque', stringData: secret },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name, labels },
      spec: {
        replicas: spec.config.replicas,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels },
          spec: {
            terminationGracePeriodSeconds: gracePeriod(spec),
            securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 },
            containers: [
              {
                name: 'vcon-server',
                image: imageOf(),
                command: ['vcon-server'],
                ports: [{ name: 'http', containerPort: port, protocol: 'TCP' }],
                env: plain,
                envFrom: [{ secretRef: { name } }],
                readinessProbe: { ...probe, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 3 },
                // /health answers 503 while the database is unreachable: a long threshold keeps a
                // database outage from restarting every pod.
                livenessProbe: { ...probe, initialDelaySeconds: 10, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 },
                resources: { requests: { cpu: '100m', memory: MEMORY_REQUEST }, limits: { memory: `${memoryMiB(spec)}Mi` } },
                securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
              },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, labels },
      spec: { type: 'ClusterIP', selector, ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }] },
    },
  ];
}

/** One Compose file: a service per group and the shared PostgreSQL its groups without a database use. */
export function composeFile(specs: GroupSpec[]): Record<string, unknown> {
  const services: Record<string, unknown> = {};
  let usesShared = false;
  for (const spec of specs) {
    const { env, port, databaseFromFile } = containerEnv(spec);
    if (!databaseFromFile) {
      env.DATABASE_URL = COMPOSE_DATABASE_URL;
      usesShared = true;
    }
    const url = `http://127.0.0.1:${port}${healthPath(spec)}`;
    services[resourceName(spec.name)] = {
      image: imageOf(),
      command: ['vcon-server'],
      environment: env,
      // A fixed host port for one replica; several replicas each get a free one (put a balancer in front).
      ports: [spec.config.replicas === 1 && spec.config.mcp.port ? `${spec.config.mcp.port}:${port}` : String(port)],
      deploy: { replicas: spec.config.replicas },
      mem_limit: `${memoryMiB(spec)}m`,
      restart: 'unless-stopped',
      stop_grace_period: `${gracePeriod(spec)}s`,
      healthcheck: {
        test: ['CMD', 'node', '-e', `fetch(${JSON.stringify(url)}).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))`],
        interval: '10s',
        timeout: '5s',
        retries: 3,
        start_period: '20s',
      },
      ...(databaseFromFile ? {} : { depends_on: { postgres: { condition: 'service_healthy' } } }),
    };
  }
  if (usesShared) {
    services.postgres = {
      image: 'postgres:16',
      environment: { POSTGRES_USER: 'vcon', POSTGRES_PASSWORD: '${POSTGRES_PASSWORD:-vcon}', POSTGRES_DB: 'vcon' },
      volumes: ['pgdata:/var/lib/postgresql/data'],
      restart: 'unless-stopped',
      healthcheck: { test: ['CMD', 'pg_isready', '-U', 'vcon', '-d', 'vcon'], interval: '5s', timeout: '5s', retries: 10 },
    };
  }
  return { services, ...(usesShared ? { volumes: { pgdata: {} } } : {}) };
}

const HEADER = (what: string) =>
  `# ${what}, written by vcon-launch export from env/ (${new Date().toISOString()}).\n` +
  `# It holds API keys and database URLs: keep it out of version control. Image: ${imageOf()} (see Dockerfile).\n`;

/** Writes a file readable by its owner only: the manifests carry keys. */
function writePrivate(file: string, text: string): void {
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
}

/** Validates the groups as `start` does and writes the target's files; returns the paths written. */
export function exportGroups(opts: ExportOptions, launcher: Pick<LauncherEnvironment, 'databaseUrl'>, cwd = process.cwd()): string[] {
  if (opts.target !== 'kubernetes' && opts.target !== 'compose') {
    throw new UserError(`--target must be kubernetes or compose, got "${opts.target}"`);
  }
  const envDir = resolveDir(opts.envDir, cwd);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const out = resolveDir(opts.out ?? path.join('deploy', opts.target), cwd);
  mkdirSync(out, { recursive: true });
  for (const spec of specs) {
    if (!reachableFromContainer(spec.config.db.url)) {
      note(
        opts.target === 'compose'
          ? `group ${spec.name}: no DATABASE_URL a container can reach; it uses the shared postgres service`
          : `group ${spec.name}: no DATABASE_URL a pod can reach; set DATABASE_URL in Secret ${resourceName(spec.name)} (placeholder written)`,
      );
    }
  }
  const written: string[] = [];
  if (opts.target === 'kubernetes') {
    for (const spec of specs) {
      const file = path.join(out, `${spec.name}.yaml`);
      const docs = kubernetesObjects(spec).map((o) => stringify(o, { lineWidth: 0 }));
      writePrivate(file, HEADER(`Kubernetes objects of group ${spec.name}`) + docs.map((d) => `---\n${d}`).join(''));
      written.push(file);
    }
  } else {
    const file = path.join(out, 'compose.yaml');
    writePrivate(file, HEADER('Compose file') + stringify(composeFile(specs), { lineWidth: 0 }));
    written.push(file);
  }
  return written;
}

export function registerExport(program: Command): void {
  const cmd = program
    .command('export')
    .description('write Kubernetes manifests or a Compose file for groups, validated like start')
    .requiredOption('--target <target>', 'kubernetes or compose')
    .option('--out <dir>', 'directory to write to (default deploy/<target>)');
  addGroupFlags(cmd);
  cmd.action((opts: ExportOptions) => {
    for (const file of exportGroups(opts, readLauncherEnvironment())) process.stdout.write(`${file}\n`);
  });
}
