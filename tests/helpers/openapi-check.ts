// A checker for OpenAPI 3.1 documents, built from what is installed (no OpenAPI validator package):
// a structural check of the document, and a response checker that validates real responses
// against it (status declared for the operation, content type declared, body matches the schema)
// with ajv's JSON Schema 2020-12 validator.
import { Ajv2020 } from 'ajv/dist/2020.js';

type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
const PATH_ITEM_KEYS = new Set<string>([...METHODS, '$ref', 'summary', 'description', 'servers', 'parameters']);
const DOC_ID = 'urn:vcon:openapi';

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const unescapePointer = (s: string) => s.replace(/~1/g, '/').replace(/~0/g, '~');

/** Resolves a local JSON pointer (`#/a/b`) in the document, or undefined. */
export function resolvePointer(doc: Json, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let node: any = doc;
  for (const seg of ref
    .slice(1)
    .split('/')
    .filter((s, i) => i > 0 || s !== '')) {
    if (node === null || typeof node !== 'object') return undefined;
    const key = unescapePointer(seg);
    if (!(key in node)) return undefined;
    node = node[key];
  }
  return node;
}

const deref = (doc: Json, node: any): any => (node && typeof node.$ref === 'string' ? deref(doc, resolvePointer(doc, node.$ref)) : node);

function newAjv() {
  return new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
}

/**
 * Structural validation of an OpenAPI 3.1 document: required fields, every operation has
 * responses, path parameters match their templates, operationIds are unique, every $ref resolves,
 * security requirements name declared schemes, every schema compiles as JSON Schema 2020-12, and
 * every example matches its schema. Returns the problems (empty when the document is valid).
 */
export function checkOpenApiDocument(doc: Json): string[] {
  const problems: string[] = [];
  const fail = (where: string, what: string) => problems.push(`${where}: ${what}`);

  if (typeof doc?.openapi !== 'string' || !/^3\.1\.\d+$/.test(doc.openapi)) fail('openapi', `must be 3.1.x, got ${JSON.stringify(doc?.openapi)}`);
  if (typeof doc?.info?.title !== 'string' || !doc.info.title) fail('info.title', 'is required');
  if (typeof doc?.info?.version !== 'string' || !doc.info.version) fail('info.version', 'is required');
  if (!doc?.paths || typeof doc.paths !== 'object') fail('paths', 'is required (an object)');
  for (const [i, s] of (doc.servers ?? []).entries()) if (typeof s?.url !== 'string') fail(`servers[${i}].url`, 'is required');

  // Every $ref resolves.
  const walk = (node: unknown, at: string) => {
    if (Array.isArray(node)) node.forEach((n, i) => walk(n, `${at}/${i}`));
    else if (node && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) {
        if (k === '$ref' && typeof v === 'string') {
          if (!v.startsWith('#/')) fail(at, `external $ref ${v} not supported`);
          else if (resolvePointer(doc, v) === undefined) fail(at, `$ref ${v} does not resolve`);
        } else if (k !== 'examples' && k !== 'example') walk(v, `${at}/${escapePointer(k)}`);
      }
    }
  };
  walk(doc, '#');

  const schemes = doc.components?.securitySchemes ?? {};
  for (const [name, s] of Object.entries<any>(schemes)) {
    if (!['apiKey', 'http', 'mutualTLS', 'oauth2', 'openIdConnect'].includes(s?.type)) fail(`securitySchemes.${name}`, `bad type ${s?.type}`);
    if (s?.type === 'http' && typeof s.scheme !== 'string') fail(`securitySchemes.${name}`, 'http needs scheme');
    if (s?.type === 'apiKey' && (typeof s.name !== 'string' || !['query', 'header', 'cookie'].includes(s.in)))
      fail(`securitySchemes.${name}`, 'apiKey needs name and in');
  }
  const checkSecurity = (sec: unknown, where: string) => {
    if (sec === undefined) return;
    if (!Array.isArray(sec)) return fail(where, 'security must be an array');
    for (const req of sec) for (const name of Object.keys(req ?? {})) if (!(name in schemes)) fail(where, `security names undeclared scheme ${name}`);
  };
  checkSecurity(doc.security, 'security');

  // Schemas that must compile, with the pointer to each, and examples to check against them.
  const ajv = newAjv();
  try {
    ajv.addSchema(doc, DOC_ID);
  } catch (err) {
    fail('document', `not loadable as a schema resource: ${(err as Error).message}`);
    return problems;
  }
  const compile = (pointer: string) => {
    try {
      return ajv.getSchema(`${DOC_ID}${pointer}`);
    } catch (err) {
      fail(pointer, `schema does not compile: ${(err as Error).message}`);
      return undefined;
    }
  };
  for (const name of Object.keys(doc.components?.schemas ?? {})) compile(`#/components/schemas/${escapePointer(name)}`);

  const checkMedia = (content: Json, at: string) => {
    if (!content || typeof content !== 'object' || Object.keys(content).length === 0) return fail(at, 'content must name at least one media type');
    for (const [type, media] of Object.entries<any>(content)) {
      const ptr = `${at}/${escapePointer(type)}`;
      if (!media?.schema) continue;
      const validate = compile(`${ptr}/schema`);
      for (const [name, ex] of Object.entries<any>(media.examples ?? {})) {
        const value = deref(doc, ex)?.value;
        if (validate && !validate(value)) fail(`${ptr}/examples/${name}`, `example does not match its schema: ${ajv.errorsText(validate.errors)}`);
      }
    }
  };

  const operationIds = new Set<string>();
  for (const [path, item] of Object.entries<any>(doc.paths ?? {})) {
    const at = `#/paths/${escapePointer(path)}`;
    if (!path.startsWith('/')) fail(at, 'path must start with /');
    for (const k of Object.keys(item ?? {})) if (!PATH_ITEM_KEYS.has(k)) fail(at, `unknown path item field ${k}`);
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    for (const method of METHODS) {
      const op = item?.[method];
      if (!op) continue;
      const where = `${at}/${method}`;
      if (op.operationId !== undefined) {
        if (operationIds.has(op.operationId)) fail(where, `duplicate operationId ${op.operationId}`);
        operationIds.add(op.operationId);
      }
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p: unknown) => deref(doc, p));
      const seen = new Set<string>();
      params.forEach((p: any, i: number) => {
        const pw = `${where}/parameters/${i}`;
        if (typeof p?.name !== 'string' || !['query', 'header', 'path', 'cookie'].includes(p?.in)) return fail(pw, 'needs name and in');
        if (seen.has(`${p.in}:${p.name}`)) fail(pw, `duplicate parameter ${p.in} ${p.name}`);
        seen.add(`${p.in}:${p.name}`);
        if (!!p.schema === !!p.content) fail(pw, 'needs exactly one of schema and content');
        if (p.schema) compile(`${pw}/schema`);
        if (p.content) {
          if (Object.keys(p.content).length !== 1) fail(pw, 'content must have exactly one media type');
          checkMedia(p.content, `${pw}/content`);
        }
        if (p.in === 'path') {
          if (p.required !== true) fail(pw, `path parameter ${p.name} must be required`);
          if (!templated.includes(p.name)) fail(pw, `path parameter ${p.name} is not in the template ${path}`);
        }
      });
      for (const name of templated) if (!seen.has(`path:${name}`)) fail(where, `path parameter {${name}} is not declared`);
      if (op.requestBody) {
        const rb = deref(doc, op.requestBody);
        checkMedia(rb?.content, `${where}/requestBody/content`);
      }
      const responses = op.responses;
      if (!responses || typeof responses !== 'object' || Object.keys(responses).length === 0) {
        fail(where, 'needs at least one response');
        continue;
      }
      for (const [status, r] of Object.entries<any>(responses)) {
        const rw = `${where}/responses/${status}`;
        if (!/^([1-5](\d\d|XX)|default)$/.test(status)) fail(rw, `bad status key ${status}`);
        const resp = deref(doc, r);
        if (typeof resp?.description !== 'string') fail(rw, 'response needs a description');
        if (resp?.content) checkMedia(resp.content, r.$ref ? `${r.$ref}/content` : `${rw}/content`);
      }
      checkSecurity(op.security, where);
    }
  }
  return problems;
}

export interface Exchange {
  method: string;
  /** Path relative to the server URL (the REST base path), query string allowed. */
  path: string;
  status: number;
  contentType: string | null;
  body: unknown;
}

interface Op {
  method: string;
  template: string;
  regex: RegExp;
  literals: number;
  operation: Json;
}

/** Validates real responses against the document and keeps count of what it saw. */
export function createResponseChecker(doc: Json) {
  const ajv = newAjv();
  ajv.addSchema(doc, DOC_ID);
  const ops: Op[] = [];
  for (const [template, item] of Object.entries<any>(doc.paths)) {
    for (const method of METHODS) {
      if (!item[method]) continue;
      const segs = template.split('/');
      const regex = new RegExp(`^${segs.map((s) => (/^\{.+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}/?$`);
      ops.push({ method, template, regex, literals: segs.filter((s) => !s.startsWith('{')).length, operation: item[method] });
    }
  }
  // Literal segments win over parameters (/vcons/batch before /vcons/{uuid}).
  ops.sort((a, b) => b.literals - a.literals);

  const seen = new Map<string, Set<number>>();
  let validated = 0;

  const findOperation = (method: string, path: string) => {
    const p = decodeURI(path.split('?')[0]);
    // The path item is the most literal template matching the path; the method must be one of its.
    const item = ops.find((o) => o.regex.test(p));
    return ops.find((o) => o.template === item?.template && o.method === method.toLowerCase());
  };

  const validateAt = (pointer: string, body: unknown): string[] => {
    const validate = ajv.getSchema(`${DOC_ID}${pointer}`);
    if (!validate) return [`no schema at ${pointer}`];
    if (validate(body)) return [];
    return (validate.errors ?? [])
      .slice(0, 8)
      .map((e) => `${e.instancePath || '(body)'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
  };

  return {
    /** Problems with one response; empty when it matches the document. */
    check(x: Exchange): string[] {
      const op = findOperation(x.method, x.path);
      const label = `${x.method} ${x.path} → ${x.status}`;
      if (!op) return [`${label}: no operation in the document`];
      const key = `${op.method.toUpperCase()} ${op.template}`;
      const declared =
        op.operation.responses[String(x.status)] ?? op.operation.responses[`${String(x.status)[0]}XX`] ?? op.operation.responses.default;
      if (!declared) return [`${label}: status ${x.status} not declared for ${key} (declared: ${Object.keys(op.operation.responses).join(', ')})`];
      if (!seen.has(key)) seen.set(key, new Set());
      seen.get(key)!.add(x.status);
      const ptrBase = declared.$ref ?? `#/paths/${escapePointer(op.template)}/${op.method}/responses/${x.status}`;
      const response = deref(doc, declared);
      validated++;
      if (!response.content) {
        return x.body === undefined || x.body === '' ? [] : [`${label}: ${key} declares no body, got ${JSON.stringify(x.body).slice(0, 200)}`];
      }
      const mediaType = (x.contentType ?? '').split(';')[0].trim().toLowerCase();
      if (!(mediaType in response.content))
        return [`${label}: content type ${mediaType || '(none)'} not declared (${Object.keys(response.content).join(', ')})`];
      const at = `${ptrBase}/content/${escapePointer(mediaType)}/schema`;
      // NDJSON: the declared schema is each line's (the document says so in the route's description).
      if (mediaType === 'application/x-ndjson' && typeof x.body === 'string') {
        return x.body
          .split('\n')
          .filter((line) => line !== '')
          .flatMap((line, i) => validateAt(at, JSON.parse(line)).map((m) => `${label}: line ${i + 1}: ${m}`));
      }
      return validateAt(at, x.body).map((m) => `${label}: ${m}`);
    },

    /** Responses outside any operation (405, unknown routes): the one error format and a listed status. */
    checkError(x: Exchange): string[] {
      const label = `${x.method} ${x.path} → ${x.status}`;
      const schema = `#/components/schemas/Error${x.status}`;
      if (resolvePointer(doc, schema) === undefined) return [`${label}: no error schema for status ${x.status}`];
      validated++;
      return validateAt(schema, x.body).map((m) => `${label}: ${m}`);
    },

    findOperation,
    /** Statuses seen per operation ("GET /vcons/{uuid}"). */
    seen: () => seen,
    validated: () => validated,
    /** Operations of the document, as "METHOD /template". */
    operations: () => ops.map((o) => `${o.method.toUpperCase()} ${o.template}`),
  };
}

export type ResponseChecker = ReturnType<typeof createResponseChecker>;

/** What checkAgainstDocument passes on; structurally the ApiExchange of tests/helpers/server.ts. */
interface Answered {
  method: string;
  path: string;
  status: number;
  headers: Headers;
  body: unknown;
}

/**
 * Fetches the instance's own document and returns a response hook that throws on any response
 * the document doesn't describe. With VCON_OPENAPI_CHECK set to a file path (not "1"), every
 * validated response is appended there as "METHOD /template status" for coverage reports.
 */
export async function checkAgainstDocument(base: string): Promise<(x: Answered) => void> {
  const doc = (await (await fetch(`${base}/openapi.json`)).json()) as Json;
  const checker = createResponseChecker(doc);
  const log = process.env.VCON_OPENAPI_CHECK && process.env.VCON_OPENAPI_CHECK !== '1' ? process.env.VCON_OPENAPI_CHECK : undefined;
  const { appendFileSync } = await import('node:fs');
  return (x) => {
    const exchange: Exchange = { method: x.method, path: x.path, status: x.status, contentType: x.headers.get('content-type'), body: x.body };
    const op = checker.findOperation(x.method, x.path);
    const problems = op || ![404, 405].includes(x.status) ? checker.check(exchange) : checker.checkError(exchange);
    if (log) appendFileSync(log, `${x.method.toUpperCase()} ${op ? op.template : '(no operation)'} ${x.status}${problems.length ? ' FAIL' : ''}\n`);
    if (problems.length) throw new Error(`Response does not match the OpenAPI document:\n  ${problems.join('\n  ')}`);
  };
}
