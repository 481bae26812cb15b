export { loadPlugins, PluginLoadError } from './loader.js';
export { runHook, PluginVetoError } from './hooks.js';
export type { Plugin, Hooks, HookName, PluginTool, SearchCriteria } from './hooks.js';
