// MCP over stdio (MCP_TRANSPORT=stdio, the default): stdout carries only the protocol; logs go to
// stderr (src/logger.ts). The scope comes from configuration: read-write unless MCP_READONLY=true.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Instance } from '../main.js';
import { getBuildInfo } from '../version.js';
import { buildMcpServer } from './server.js';
import { checkedStdin } from './stdio-input.js';

/** Serves one MCP client on stdin/stdout until stdin ends, then stops the instance and exits. */
export async function serveStdio(instance: Instance): Promise<void> {
  const { config, log, services } = instance;
  const scope = config.mcp.readOnly ? 'read' : 'write';
  const server = buildMcpServer(
    {
      services,
      buildInfo: getBuildInfo(),
      log,
      production: config.production,
      basePath: config.rest.basePath,
      validation: config.validation,
      maxSubscriptions: config.mcp.maxSubscriptions,
    },
    { scope, keyId: null, session: 'stdio' },
  );
  // A vCon with recordings inline can be large: accept what REST accepts.
  // Every line is first held to REST's JSON rules (a repeated field name, an inexact number, bad UTF-8).
  const input = process.stdin.pipe(checkedStdin(config.limits.maxElements, (line) => process.stdout.write(line)));
  const transport = new StdioServerTransport(input, process.stdout, { maxBufferSize: config.rest.bodyLimit });
  let done = false;
  const shutdown = (why: string) => {
    if (done) return;
    done = true;
    log.info({ why }, 'mcp stdio session ended');
    void server
      .close()
      .catch(() => undefined)
      .then(() => instance.stop())
      .then(
        () => process.exit(0),
        (err) => {
          log.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  transport.onclose = () => shutdown('transport closed');
  // The SDK transport doesn't watch for end of input; the client closing stdin ends the session.
  process.stdin.once('end', () => shutdown('stdin closed'));
  await server.connect(transport);
  log.info({ scope, version: getBuildInfo().version }, 'mcp stdio ready');
}
