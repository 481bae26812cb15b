// Plugin hooks around every operation. Every hook of every plugin runs, in load order: a before-hook
// may return a replacement input or veto by throwing; an after-hook may return a replacement
// output. Hooks are run by services only, so REST, MCP tools and resources share them.
// Keep in sync with docs/plugins.md.
import type { z } from 'zod';
import { AppError } from '../domain/errors.js';
import type { JsonObject } from '../domain/vcon.js';
import type { RequestCtx } from '../services/context.js';

type Maybe<T> = T | void | undefined | Promise<T | void | undefined>;

/** What a search or list asks for, as hooks see it (they may narrow it). */
export interface SearchCriteria {
  kind: 'list' | 'content' | 'semantic' | 'hybrid' | 'tags';
  query: Record<string, unknown>;
}

export interface Hooks {
  beforeCreate?(vcon: JsonObject, ctx: RequestCtx): Maybe<JsonObject>;
  afterCreate?(vcon: JsonObject, ctx: RequestCtx): Maybe<JsonObject>;
  beforeRead?(uuid: string, ctx: RequestCtx): Maybe<string>;
  afterRead?(vcon: JsonObject, ctx: RequestCtx): Maybe<JsonObject>;
  beforeUpdate?(changes: JsonObject, ctx: RequestCtx & { uuid: string }): Maybe<JsonObject>;
  afterUpdate?(vcon: JsonObject, ctx: RequestCtx): Maybe<JsonObject>;
  beforeSearch?(criteria: SearchCriteria, ctx: RequestCtx): Maybe<SearchCriteria>;
  afterSearch?<T>(results: T[], ctx: RequestCtx & { criteria: SearchCriteria }): Maybe<T[]>;
  beforeDelete?(uuid: string, ctx: RequestCtx): Maybe<string>;
  afterDelete?(uuid: string, ctx: RequestCtx): Maybe<string>;
}

export type HookName = keyof Hooks;

/** A tool a plugin offers on MCP (read-write sessions only). */
export interface PluginTool {
  name: string;
  description: string;
  inputSchema?: z.ZodRawShape;
  handler(args: Record<string, unknown>, ctx: RequestCtx): Promise<unknown> | unknown;
}

export interface Plugin {
  name: string;
  version: string;
  hooks?: Hooks;
  tools?: PluginTool[];
}

/** Thrown by a plugin to refuse an operation; becomes a clear 4xx (403 unless told otherwise). */
export class PluginVetoError extends AppError {
  constructor(message: string, status = 403, code = status === 403 ? 'forbidden' : 'validation_failed') {
    super(status, code, message);
  }
}

/** Runs one hook of every plugin in order, threading the value through; returns the final value. */
export async function runHook<K extends HookName>(
  plugins: readonly Plugin[],
  name: K,
  value: Parameters<NonNullable<Hooks[K]>>[0],
  ...rest: unknown[]
): Promise<Parameters<NonNullable<Hooks[K]>>[0]> {
  let current = value;
  for (const plugin of plugins) {
    const fn = plugin.hooks?.[name] as ((v: unknown, ...a: unknown[]) => unknown) | undefined;
    if (!fn) continue;
    let out: unknown;
    try {
      out = await fn.call(plugin.hooks, current, ...rest);
    } catch (err) {
      if (err instanceof AppError) throw err;
      // A plain error from a before-hook is a veto; from an after-hook it is a plugin fault.
      if (name.startsWith('before')) {
        throw new PluginVetoError(`${plugin.name}: ${(err as Error)?.message ?? String(err)}`);
      }
      throw new AppError(500, 'internal_error', `plugin ${plugin.name} failed in ${name}: ${(err as Error)?.message ?? String(err)}`);
    }
    if (out !== undefined && out !== null) current = out as typeof current;
  }
  return current;
}
