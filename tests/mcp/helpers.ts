import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

export const PLUGIN_PATH = './tests/mcp/fixtures/mcp-plugin.mjs';

export interface HttpSession {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** Calls a tool and returns the result with its structured content typed loosely. */
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult & { structuredContent?: any }>;
  close(): Promise<void>;
}

/** Opens an MCP session over Streamable HTTP at `${url}/mcp` with the given key (null: none). */
export async function connectHttp(url: string, key: string | null, header = 'authorization'): Promise<HttpSession> {
  const headers: Record<string, string> = {};
  if (key !== null) headers[header] = header === 'authorization' ? `Bearer ${key}` : key;
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } });
  const client = new Client({ name: 'vcon-mcp-tests', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    transport,
    call: async (name, args = {}) => (await client.callTool({ name, arguments: args })) as CallToolResult & { structuredContent?: any },
    async close() {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    },
  };
}

/** The text of a tool result's first content item. */
export const textOf = (r: CallToolResult): string => (r.content[0] as { type: 'text'; text: string }).text;
