// vcon-launch export: deployment units for Kubernetes or Compose from the same env files `start`
// reads, validated by the same loader (same messages). Nothing is built or applied here.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { createCredentialStore, type CredentialStore } from '../credentials.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroups, resolveDir, selectGroupNames, type GroupSpec } from '../groups.js';
import { addGroupFlags, addInstancesDirFlag, type GroupFlags } from '../options.js';
import { commandHint, note } from '../output.js';
import { groupRoleNamesOf } from '../roles.js';
import { exportSystemd } from '../systemd.js';
import { groupRoleNames, userOfUrl, withCredentials } from '../../src/db/roles.js';
import { SECRET_VARIABLES } from '../../src/config.js';
import { getBuildInfo } from '../../src/version.js';
import { heapLimitMiB } from '../../src/config.js';

export type ExportTarget = 'kubernetes' | 'compose' | 'pgbouncer';

export interface ExportOptions extends GroupFlags {
  target: string;
  out?: string;
  /** Where `start` keeps the groups' role passwords (instances/credentials/). */
  instancesDir?: string;
}

/** The port the server listens on inside a container when the env file leaves it to the OS (0). */
export const CONTAINER_PORT = 3000;
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
/** The shared PostgreSQL service of a Compose export: its superuser is used by the provisioning step alone. */
const COMPOSE_POSTGRES = { host: 'postgres:5432', database: 'vcon', superuser: 'postgres' };
/** Compose refuses to start while a variable written `${NAME:?…}` is unset or empty: no default passwords. */
const required = (variable: string) => `\${${variable}:?set ${variable}}`;

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

/** Variables that say who a group connects as: replaced by the group's own identity. */
const IDENTITY_VARIABLES = [
  'DATABASE_URL',
  'SUPABASE_DB_URL',
  'DATABASE_USER',
  'DATABASE_PASSWORD',
  'ANALYZE_DATABASE_USER',
  'ANALYZE_DATABASE_PASSWORD',
];

/**
 * The variables that connect a group as its own PostgreSQL role, never as the URL's user when that
 * is someone else (the launcher's admin): the env file's URL as it is when it already names the
 * role (`provision` wrote it), else the role `start` made, from the credentials store. Undefined
 * when the group has neither.
 */
export function ownIdentity(spec: GroupSpec, store: CredentialStore): Record<string, string> | undefined {
  const url = spec.databaseUrl;
  if (!url) return undefined;
  const { user, password } = spec.config.db;
  if ((user ?? userOfUrl(url)) === groupRoleNamesOf(spec, url).role) {
    const analyze = Object.fromEntries(
      ['ANALYZE_DATABASE_USER', 'ANALYZE_DATABASE_PASSWORD'].flatMap((k) => (spec.env[k] ? [[k, spec.env[k]]] : [])),
    );
    return { DATABASE_URL: withCredentials(url, user, password), ...analyze };
  }
  const creds = store.get(spec.name);
  if (!creds || creds.schema !== spec.config.db.schema) return undefined;
  return {
    DATABASE_URL: withCredentials(url, creds.role, creds.password),
    ANALYZE_DATABASE_USER: creds.analyze_role,
    ANALYZE_DATABASE_PASSWORD: creds.analyze_password,
  };
}

/** The Compose variables holding a group's role passwords on the shared service (VCON_<GROUP>_…). */
export function composePasswordVariables(group: string): { role: string; analyze: string } {
  const base = `VCON_${group.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}`;
  return { role: `${base}_DB_PASSWORD`, analyze: `${base}_ANALYZE_PASSWORD` };
}

/** The identity of a group on the Compose file's shared service: its roles, passwords from Compose's environment. */
function sharedServiceIdentity(spec: GroupSpec): Record<string, string> {
  const names = groupRoleNames(COMPOSE_POSTGRES.database, spec.config.db.schema);
  const vars = composePasswordVariables(spec.name);
  const { host, database } = COMPOSE_POSTGRES;
  return {
    DATABASE_URL: `postgres://${names.role}:${required(vars.role)}@${host}/${database}`,
    ANALYZE_DATABASE_USER: names.analyzeRole,
    ANALYZE_DATABASE_PASSWORD: required(vars.analyze),
  };
}

/** The container's environment: the group's, listening on all interfaces at a fixed port, connecting as `identity`. */
function containerEnv(spec: GroupSpec, identity: Record<string, string>): { env: Record<string, string>; port: number } {
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
  for (const k of IDENTITY_VARIABLES) delete env[k];
  return { env: { ...env, ...identity }, port };
}

/** Each group's identity in the target, or one UserError naming every group that has none yet. */
function resolveIdentities(specs: GroupSpec[], target: ExportTarget, store: CredentialStore, envDirFlag: string): Map<string, Identity> {
  const envFlag = envDirFlag === 'env' ? '' : ` --env-dir ${JSON.stringify(envDirFlag)}`;
  const out = new Map<string, Identity>();
  const refusals: string[] = [];
  for (const spec of specs) {
    const provision = commandHint(`provision --group ${spec.name}${envFlag}`);
    if (target === 'compose' && !reachableFromContainer(spec.databaseUrl)) {
      out.set(spec.name, { env: sharedServiceIdentity(spec), shared: true });
      continue;
    }
    const own = ownIdentity(spec, store);
    if (own) {
      out.set(spec.name, { env: own, shared: false });
      continue;
    }
    refusals.push(
      spec.databaseUrl
        ? `group ${spec.name}: its DATABASE_URL connects as ${spec.config.db.user ?? userOfUrl(spec.databaseUrl)}, not as the group's own role, and export never hands a group the launcher's credentials; give it its role first: ${provision}`
        : `group ${spec.name}: no database a pod can reach; set DATABASE_URL in ${spec.envFile} to the PostgreSQL server the pods will use (a user that may create roles), then: ${provision}`,
    );
  }
  const byVariable = new Map<string, string>();
  for (const spec of specs.filter((s) => out.get(s.name)?.shared)) {
    const variable = composePasswordVariables(spec.name).role;
    const other = byVariable.get(variable);
    if (other) refusals.push(`groups ${other} and ${spec.name} would share the Compose variable ${variable}; rename one`);
    byVariable.set(variable, spec.name);
  }
  if (refusals.length) throw new UserError(refusals.join('\n'));
  return out;
}

/** A group's database identity in an export: its own role's variables; `shared` on the Compose file's postgres service. */
interface Identity {
  env: Record<string, string>;
  shared: boolean;
}

/** The probes' paths: liveness answers while the process does (a database outage restarts nothing), readiness as /health. */
const livePath = (spec: GroupSpec) => `${spec.config.rest.basePath}/livez`;
const readyPath = (spec: GroupSpec) => `${spec.config.rest.basePath}/readyz`;
const gracePeriod = (spec: GroupSpec) => Math.ceil(spec.config.shutdownTimeoutMs / 1000) + GRACE_MARGIN_S;

/** Secret, Deployment and Service of one group, as plain Kubernetes objects. */
export function kubernetesObjects(spec: GroupSpec, identity: Identity): Record<string, unknown>[] {
  const name = resourceName(spec.name);
  const labels = { 'app.kubernetes.io/name': 'vcon-launch', 'app.kubernetes.io/instance': name, 'vcon-launch/group': spec.name };
  const selector = { 'app.kubernetes.io/name': 'vcon-launch', 'app.kubernetes.io/instance': name };
  const { env, port } = containerEnv(spec, identity.env);
  const secret: Record<string, string> = {};
  const plain: { name: string; value: string }[] = [];
  for (const [k, v] of Object.entries(env).sort(([a], [b]) => a.localeCompare(b))) {
    // Keys and passwords go into the Secret, the rest into the Deployment's plain env.
    if (SECRET_VARIABLES.has(k)) secret[k] = v;
    else plain.push({ name: k, value: v });
  }
  const live = { httpGet: { path: livePath(spec), port: 'http' } };
  const ready = { httpGet: { path: readyPath(spec), port: 'http' } };
  // Prometheus' conventional pod annotations; the scrape job sends METRICS_KEY (or a group key) as a bearer token.
  const scrape = { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(port), 'prometheus.io/path': '/metrics' };
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
          metadata: { labels, annotations: scrape },
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
                // Startup (migrations, a cold PostgreSQL) may take a while: up to 5 minutes before liveness counts.
                startupProbe: { ...live, periodSeconds: 2, timeoutSeconds: 3, failureThreshold: 150 },
                readinessProbe: { ...ready, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 3 },
                // /livez stays 200 while the database is down: only a process that stopped answering is restarted.
                livenessProbe: { ...live, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 },
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

/**
 * The one-shot service that gives each group on the shared postgres service its own roles:
 * `vcon-launch provision` over the superuser's URL, which no group's service gets, with env files
 * written from its environment (the passwords interpolated by Compose).
 */
function provisionService(specs: GroupSpec[], identities: Map<string, Identity>): Record<string, unknown> {
  const dir = '/tmp/vcon-env';
  const environment: Record<string, string> = {
    DATABASE_URL: `postgres://${COMPOSE_POSTGRES.superuser}:${required('POSTGRES_PASSWORD')}@${COMPOSE_POSTGRES.host}/${COMPOSE_POSTGRES.database}`,
  };
  const writes: string[] = [];
  for (const spec of specs) {
    const id = identities.get(spec.name)!;
    if (!id.shared) continue;
    const variable = `${composePasswordVariables(spec.name).role.replace(/_DB_PASSWORD$/, '')}_ENV`;
    environment[variable] = Object.entries({ SUPABASE_DB_SCHEMA: spec.config.db.schema, ...id.env })
      .map(([k, v]) => `${k}=${v}\n`)
      .join('');
    // Group names are letters, digits, '.', '_' and '-': safe inside single quotes.
    writes.push(`printenv ${variable} > '${dir}/${spec.name}.env'`);
  }
  return {
    image: imageOf(),
    command: ['sh', '-c', ['umask 077', `mkdir -p ${dir}`, ...writes, `exec vcon-launch provision --all --env-dir ${dir}`].join(' && ')],
    environment,
    depends_on: { postgres: { condition: 'service_healthy' } },
    restart: 'no',
  };
}

/** One Compose file: a service per group, and for groups without a database of their own the shared PostgreSQL and its provisioning step. */
export function composeFile(specs: GroupSpec[], identities: Map<string, Identity>): Record<string, unknown> {
  const services: Record<string, unknown> = {};
  const usesShared = specs.some((s) => identities.get(s.name)!.shared);
  for (const spec of specs) {
    const identity = identities.get(spec.name)!;
    const { env, port } = containerEnv(spec, identity.env);
    const url = `http://127.0.0.1:${port}${readyPath(spec)}`;
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
      ...(identity.shared
        ? { depends_on: { postgres: { condition: 'service_healthy' }, [PROVISION_SERVICE]: { condition: 'service_completed_successfully' } } }
        : {}),
    };
  }
  if (usesShared) {
    const { superuser, database } = COMPOSE_POSTGRES;
    services.postgres = {
      image: 'postgres:16',
      environment: { POSTGRES_USER: superuser, POSTGRES_PASSWORD: required('POSTGRES_PASSWORD'), POSTGRES_DB: database },
      volumes: ['pgdata:/var/lib/postgresql/data'],
      restart: 'unless-stopped',
      healthcheck: { test: ['CMD', 'pg_isready', '-U', superuser, '-d', database], interval: '5s', timeout: '5s', retries: 10 },
    };
    services[PROVISION_SERVICE] = provisionService(specs, identities);
  }
  return { services, ...(usesShared ? { volumes: { pgdata: {} } } : {}) };
}

/** The Compose service that provisions the groups' roles on the shared postgres service. */
export const PROVISION_SERVICE = 'vcon-provision';

const HEADER = (what: string) =>
  `# ${what}, written by vcon-launch export from env/ (${new Date().toISOString()}).\n` +
  `# It holds API keys and database URLs: keep it out of version control. Image: ${imageOf()} (see Dockerfile).\n`;

/** What a Compose file asks of its environment before `docker compose up` runs. */
const composeHeader = (specs: GroupSpec[], identities: Map<string, Identity>) => {
  const shared = specs.filter((s) => identities.get(s.name)!.shared);
  if (!shared.length) return '';
  const vars = ['POSTGRES_PASSWORD', ...shared.flatMap((s) => Object.values(composePasswordVariables(s.name)))];
  return (
    `# Set before \`docker compose up\` (Compose refuses to start without them; use URL-safe values,\n` +
    `# e.g. \`openssl rand -hex 24\`): ${vars.join(', ')}.\n` +
    `# POSTGRES_PASSWORD is the database superuser's: only the ${PROVISION_SERVICE} step uses it, each group connects as its own role.\n`
  );
};

/** PgBouncer's quoting of a userlist field ("" doubles a quote). */
const quoted = (v: string) => `"${v.replace(/"/g, '""')}"`;

/**
 * PgBouncer's config and userlist for the groups' own roles: one database entry per server and
 * database the groups use, each group's role with a pool of its DB_POOL_MAX times its replicas (the
 * connections `start` would give its processes), its analyze role with its connection limit, and
 * the server's total as max_db_connections. Transaction pooling: the groups then set DB_POOLER=pgbouncer.
 */
export function pgbouncerFiles(specs: GroupSpec[], identities: Map<string, Identity>): { ini: string; userlist: string } {
  const databases = new Map<string, string>();
  const users: string[] = [];
  const secrets: string[] = [];
  const totals = new Map<string, number>();
  let largestPool = 1;
  for (const spec of specs) {
    const env = identities.get(spec.name)!.env;
    const url = new URL(env.DATABASE_URL);
    const database = decodeURIComponent(url.pathname.slice(1)) || 'postgres';
    const target = `host=${url.hostname.replace(/^\[|\]$/g, '')} port=${url.port || 5432} dbname=${database}`;
    const known = databases.get(database);
    if (known && known !== target)
      throw new UserError(`groups use two servers with a database named ${database}; export them to PgBouncer separately`);
    databases.set(database, target);
    const role = decodeURIComponent(url.username);
    const pool = spec.config.db.pool.size * spec.config.replicas;
    const analyze = spec.config.db.pool.analyze;
    users.push(`${role} = max_user_connections=${pool}`);
    largestPool = Math.max(largestPool, pool, analyze);
    secrets.push(`${quoted(role)} ${quoted(decodeURIComponent(url.password))}`);
    if (env.ANALYZE_DATABASE_USER && env.ANALYZE_DATABASE_PASSWORD && analyze > 0) {
      users.push(`${env.ANALYZE_DATABASE_USER} = max_user_connections=${analyze}`);
      secrets.push(`${quoted(env.ANALYZE_DATABASE_USER)} ${quoted(env.ANALYZE_DATABASE_PASSWORD)}`);
    }
    totals.set(database, (totals.get(database) ?? 0) + pool + analyze);
  }
  const ini = [
    '[databases]',
    ...[...databases].map(([name, target]) => `${name} = ${target} max_db_connections=${totals.get(name)}`),
    '',
    '[users]',
    ...users,
    '',
    '[pgbouncer]',
    'listen_addr = 0.0.0.0',
    'listen_port = 6432',
    // The passwords themselves in the auth file (mode 0600, like the env files that hold them too):
    // PostgreSQL 14 and later store SCRAM verifiers, and PgBouncer can log in to the server with
    // SCRAM only from a password or the server's own verifier, never from an md5 secret.
    'auth_type = scram-sha-256',
    'auth_file = userlist.txt',
    'pool_mode = transaction',
    // A role's pool is one database and user pair: as large as the largest group's, each role then
    // held to its own by max_user_connections (PgBouncer 1.18, Debian 12's, refuses pool_size in [users]).
    `default_pool_size = ${largestPool}`,
    // Each group's client pool (DB_POOLER=pgbouncer: PGBOUNCER_POOL_MAX by default) per process, with room.
    `max_client_conn = ${Math.max(
      100,
      specs.reduce((n, s) => n + 2 * s.config.db.pool.size * s.config.replicas, 0),
    )}`,
    '',
  ].join('\n');
  return { ini, userlist: secrets.map((l) => `${l}\n`).join('') };
}

/** Writes a file readable by its owner only: the manifests carry keys. */
function writePrivate(file: string, text: string): void {
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
}

/** Validates the groups as `start` does and writes the target's files; returns the paths written. */
export function exportGroups(opts: ExportOptions, launcher: Pick<LauncherEnvironment, 'databaseUrl' | 'groupUsers'>, cwd = process.cwd()): string[] {
  if (opts.target === 'systemd') return exportSystemd(opts, launcher, cwd);
  if (opts.target !== 'kubernetes' && opts.target !== 'compose' && opts.target !== 'pgbouncer') {
    throw new UserError(`--target must be kubernetes, compose, systemd or pgbouncer, got "${opts.target}"`);
  }
  const envDir = resolveDir(opts.envDir, cwd);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const store = createCredentialStore(resolveDir(opts.instancesDir ?? 'instances', cwd));
  const identities = resolveIdentities(specs, opts.target as ExportTarget, store, opts.envDir);
  const out = resolveDir(opts.out ?? path.join('deploy', opts.target), cwd);
  mkdirSync(out, { recursive: true });
  for (const spec of opts.target === 'pgbouncer' ? [] : specs) {
    if (identities.get(spec.name)!.shared)
      note(`group ${spec.name}: no DATABASE_URL a container can reach; it uses the shared postgres service, as its own role`);
    else if (!reachableFromContainer(spec.databaseUrl))
      note(`group ${spec.name}: its DATABASE_URL names this machine, which no pod reaches; change the host in Secret ${resourceName(spec.name)}`);
  }
  const written: string[] = [];
  if (opts.target === 'pgbouncer') {
    const { ini, userlist } = pgbouncerFiles(specs, identities);
    const header = `# PgBouncer config, written by vcon-launch export from env/ (${new Date().toISOString()}); userlist.txt holds the roles' passwords: keep both private.\n`;
    const files = { 'pgbouncer.ini': header + ini, 'userlist.txt': userlist };
    for (const [name, text] of Object.entries(files)) {
      writePrivate(path.join(out, name), text);
      written.push(path.join(out, name));
    }
    note('point each group at PgBouncer: DATABASE_URL with host:6432 and DB_POOLER=pgbouncer');
    return written;
  }
  if (opts.target === 'kubernetes') {
    for (const spec of specs) {
      const file = path.join(out, `${spec.name}.yaml`);
      const docs = kubernetesObjects(spec, identities.get(spec.name)!).map((o) => stringify(o, { lineWidth: 0 }));
      writePrivate(file, HEADER(`Kubernetes objects of group ${spec.name}`) + docs.map((d) => `---\n${d}`).join(''));
      written.push(file);
    }
  } else {
    const file = path.join(out, 'compose.yaml');
    writePrivate(file, HEADER('Compose file') + composeHeader(specs, identities) + stringify(composeFile(specs, identities), { lineWidth: 0 }));
    written.push(file);
  }
  return written;
}

export function registerExport(program: Command): void {
  const cmd = program
    .command('export')
    .description("write Kubernetes manifests, a Compose file, systemd units, or PgBouncer's config and userlist for groups, validated like start")
    .requiredOption('--target <target>', 'kubernetes, compose, systemd or pgbouncer')
    .option('--out <dir>', 'directory to write to (default deploy/<target>)');
  addGroupFlags(cmd);
  addInstancesDirFlag(cmd);
  cmd.action((opts: ExportOptions) => {
    for (const file of exportGroups(opts, readLauncherEnvironment())) process.stdout.write(`${file}\n`);
  });
}
