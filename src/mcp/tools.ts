// The MCP tools, generated from the operation table (src/transport/operations.ts): a tool's
// arguments are its route's path parameters, body (whole, under one name, or its fields) and query
// parameters, each the very schema of src/domain the route parses it with; its result is the
// route's answer without `success`. Tool-only entries of the table (manage_tag) come as declared.
import { z } from 'zod';
import { ValidationError } from '../domain/errors.js';
import { parseParams } from '../domain/params.js';
import { EncryptedVcon, SignedVcon, vconSchemas, type ValidationMode } from '../domain/vcon.js';
import type { RequestCtx } from '../services/context.js';
import { OPERATIONS, PATH_PARAMS, SCHEMAS, type OpEnv, type OpInput, type Operation, type ToolSpec } from '../transport/operations.js';
import { portableJsonSchema } from './portable-schema.js';

type Args = Record<string, unknown>;

/** What a tool needs besides its arguments and the caller's context. */
export type ToolEnv = OpEnv;

export interface ToolDef {
  name: string;
  title: string;
  /** Written for an AI assistant: what it does, when to use it, what comes back. */
  description: string;
  /** Arguments: each one the very schema of src/domain that REST uses for the same parameter. */
  input: z.ZodRawShape;
  /** 'write' tools are offered to read-write sessions only. */
  scope: 'read' | 'write';
  annotations: ToolSpec['annotations'];
  /** The service operations behind it (`group.method`), for the REST/MCP parity test. */
  operations: readonly string[];
  /** The argument that is a whole vCon or item, whose schema is the group's validation mode's. */
  document?: { arg: string; component: DocumentComponent };
  run(args: Args, ctx: RequestCtx, env: ToolEnv): Promise<Record<string, unknown>>;
}

/** The body components whose schema depends on the group's validation mode. */
const MODE_SCHEMAS = {
  StoredVcon: (mode: ValidationMode) => z.union([vconSchemas(mode).Vcon, SignedVcon, EncryptedVcon]),
  Vcon: (mode: ValidationMode) => vconSchemas(mode).Vcon,
  Dialog: (mode: ValidationMode) => vconSchemas(mode).Dialog,
  Analysis: (mode: ValidationMode) => vconSchemas(mode).Analysis,
  Attachment: (mode: ValidationMode) => vconSchemas(mode).Attachment,
};
type DocumentComponent = keyof typeof MODE_SCHEMAS;

const pathParams = (path: string) => (path.match(/:([A-Za-z0-9_]+)/g) ?? []).map((p) => p.slice(1));

/** The body schema of an operation (a component's, for a named body). */
const bodySchema = (o: Operation): z.ZodType | undefined => o.body && (typeof o.body.schema === 'string' ? SCHEMAS[o.body.schema] : o.body.schema);

/** A tool of an operation: its arguments in the order path, body, query; its call the operation's. */
function toolOf(o: Operation, t: ToolSpec): ToolDef {
  const path = pathParams(o.path);
  const body = bodySchema(o);
  const bodyFields = body && !t.bodyArg ? Object.keys((body as z.ZodObject).shape) : [];
  const queryShape = (o.query?.shape ?? {}) as z.ZodRawShape;
  const query = t.pick ?? Object.keys(queryShape);
  const input: Record<string, z.ZodType> = {};
  for (const name of path) input[name] = PATH_PARAMS[name];
  if (body && t.bodyArg) input[t.bodyArg.name] = body;
  else if (body) Object.assign(input, (body as z.ZodObject).shape);
  for (const name of query) input[name] = queryShape[name] as z.ZodType;
  const pathSchema = t.bodyArg && path.length ? z.object(Object.fromEntries(path.map((n) => [n, PATH_PARAMS[n]]))) : undefined;
  const pick = (args: Args, names: readonly string[]) => Object.fromEntries(names.filter((n) => n in args).map((n) => [n, args[n]]));
  return {
    name: t.name,
    title: t.title,
    description: t.description,
    input,
    scope: o.scope === 'write' ? 'write' : 'read',
    annotations: t.annotations,
    operations: o.operations,
    ...(t.bodyArg && typeof o.body?.schema === 'string' && o.body.schema in MODE_SCHEMAS
      ? { document: { arg: t.bodyArg.name, component: o.body.schema as DocumentComponent } }
      : {}),
    run: async (args, ctx, env) => {
      // A bad path parameter is named before a missing document, as the route refuses it first.
      if (pathSchema) parseParams(pathSchema, args);
      const input: OpInput = {
        path: pick(args, path),
        query: pick(args, query),
        body: t.bodyArg ? documentArg(args, t.bodyArg.name, t.bodyArg.what) : body ? pick(args, bodyFields) : undefined,
      };
      return (await o.call(input, ctx, env)) as Record<string, unknown>;
    },
  };
}

/**
 * A document argument (vcon, updates, dialog, ...): when it is missing the error names it, where the
 * service, which sees only the document, would say "(root): must be an object".
 */
function documentArg(args: Args, name: string, what: string): unknown {
  if (args[name] !== undefined) return args[name];
  const message = `is required: ${what}`;
  throw new ValidationError(`${name}: ${message}`, [{ path: name, message }]);
}

/** Every tool of the MCP surface, in the order of the operation table. */
export const TOOLS: readonly ToolDef[] = OPERATIONS.flatMap((e): ToolDef[] => ('tool' in e ? [e.tool] : (e.tools ?? []).map((t) => toolOf(e, t))));

const jsonSchemaCache = new WeakMap<z.ZodType, Record<string, unknown>>();

function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  let js = jsonSchemaCache.get(schema);
  if (!js) {
    js = portableJsonSchema(schema);
    jsonSchemaCache.set(schema, js);
  }
  return js;
}

const modeInputs = new Map<string, z.ZodRawShape>();

/**
 * A tool's arguments in a validation mode: a document argument (create_vcon's vcon, add_analysis's
 * analysis, ...) carries that mode's schema, so a client that checks its arguments against what is
 * advertised accepts what the group accepts (an object analysis body in ietf and lenient groups).
 */
export function inputOf(tool: ToolDef, mode: ValidationMode): z.ZodRawShape {
  if (mode === 'strict' || !tool.document) return tool.input;
  const key = `${mode}:${tool.name}`;
  let shape = modeInputs.get(key);
  if (!shape) {
    shape = { ...tool.input, [tool.document.arg]: MODE_SCHEMAS[tool.document.component](mode) };
    modeInputs.set(key, shape);
  }
  return shape;
}

/** One advertised schema per shape: every session registers the same tools. */
const advertisedCache = new WeakMap<z.ZodRawShape, z.ZodObject>();

/**
 * The schema handed to the SDK: it advertises each argument with the JSON Schema of its domain
 * schema, but accepts any value, so that validation happens once, in the domain parsers and
 * services, and failures carry REST's codes (validation_failed, invalid_parameter) instead of
 * the SDK's generic "Input validation error". The properties are given whole as the object's
 * metadata: zod would otherwise fold each argument's `anyOf` of single types back into a `type`
 * array when the SDK converts it.
 */
export function advertisedSchema(shape: z.ZodRawShape): z.ZodObject {
  const cached = advertisedCache.get(shape);
  if (cached) return cached;
  const fields: Record<string, z.ZodType> = {};
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const [key, schema] of Object.entries(shape)) {
    fields[key] = z.unknown().optional();
    properties[key] = jsonSchemaOf(schema as z.ZodType);
    if (!(schema as z.ZodType).safeParse(undefined).success) required.push(key);
  }
  const schema = z.object(fields).meta(required.length ? { properties, required } : { properties });
  advertisedCache.set(shape, schema);
  return schema;
}
