import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Plugin } from './hooks.js';

interface Log {
  info(obj: object, msg: string): void;
}

/** Raised when a configured plugin can't be loaded: the instance must not start without it. */
export class PluginLoadError extends Error {
  override name = 'PluginLoadError';
}

function toPlugin(mod: unknown, spec: string): Plugin {
  let candidate = (mod as { default?: unknown })?.default ?? mod;
  if (typeof candidate === 'function') {
    // A class (or a factory) producing the plugin object.
    const Ctor = candidate as new () => unknown;
    try {
      candidate = new Ctor();
    } catch {
      candidate = (candidate as () => unknown)();
    }
  }
  const p = candidate as Partial<Plugin> | undefined;
  if (!p || typeof p !== 'object' || typeof p.name !== 'string' || typeof p.version !== 'string') {
    throw new PluginLoadError(`plugin ${spec} must export { name, version, hooks?, tools? } as its default export`);
  }
  if (p.hooks !== undefined && (typeof p.hooks !== 'object' || p.hooks === null)) {
    throw new PluginLoadError(`plugin ${p.name}: hooks must be an object of hook functions`);
  }
  if (p.tools !== undefined && !Array.isArray(p.tools)) throw new PluginLoadError(`plugin ${p.name}: tools must be an array`);
  return p as Plugin;
}

/** Loads plugins from VCON_PLUGINS_PATH entries (file paths or package names), in order. */
export async function loadPlugins(specs: string[], log?: Log, cwd = process.cwd()): Promise<Plugin[]> {
  const plugins: Plugin[] = [];
  for (const spec of specs) {
    const isPath = spec.startsWith('.') || spec.startsWith('/') || /\.[cm]?[jt]s$/.test(spec);
    const target = isPath ? pathToFileURL(path.resolve(cwd, spec)).href : spec;
    let mod: unknown;
    try {
      mod = await import(target);
    } catch (err) {
      throw new PluginLoadError(`cannot load plugin ${spec}: ${(err as Error).message}`);
    }
    const plugin = toPlugin(mod, spec);
    log?.info({ plugin: plugin.name, version: plugin.version, from: spec }, 'plugin loaded');
    plugins.push(plugin);
  }
  return plugins;
}
