import type { Instance } from '../main.js';

/** MCP over stdio: stdout is the protocol, logs go to stderr. */
export async function serveStdio(instance: Instance): Promise<void> {
  instance.log.warn('MCP stdio transport is not wired yet');
}
