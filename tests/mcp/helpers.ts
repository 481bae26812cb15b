import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

export const PLUGIN_PATH = './tests/mcp/fixtures/mcp-plugin.mjs';

export interface HttpSession {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** Calls a tool and returns the result with its structured content typed loosely. */
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult & { structuredContent?: any }>;
  /** Settles once the client's standalone SSE stream (GET /mcp) has been answered with a stream. */
  sseOpen: Promise<void>;
  close(): Promise<void>;
}

/** Opens an MCP session over Streamable HTTP at `${url}/mcp` with the given key (null: none). */
export async function connectHttp(url: string, key: string | null, header = 'authorization'): Promise<HttpSession> {
  const headers: Record<string, string> = {};
  if (key !== null) headers[header] = header === 'authorization' ? `Bearer ${key}` : key;
  let opened!: () => void;
  const sseOpen = new Promise<void>((resolve) => (opened = resolve));
  // The client opens its SSE stream in the background after initialising: watch for the answer.
  const watching: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const isStream = res.headers.get('content-type')?.startsWith('text/event-stream');
    if ((init?.method ?? 'GET') === 'GET' && res.ok && isStream) opened();
    return res;
  };
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers }, fetch: watching });
  const client = new Client({ name: 'vcon-mcp-tests', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    transport,
    sseOpen,
    call: async (name, args = {}) => (await client.callTool({ name, arguments: args })) as CallToolResult & { structuredContent?: any },
    async close() {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    },
  };
}

/** The text of a tool result's first content item. */
export const textOf = (r: CallToolResult): string => (r.content[0] as { type: 'text'; text: string }).text;
