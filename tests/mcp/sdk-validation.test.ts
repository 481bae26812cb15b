// Why the SDK is not handed the domain schemas (docs/architecture.md, MCP, "Tool arguments"): what
// @modelcontextprotocol/sdk's McpServer does when a tool is registered with its real arguments, seen
// through the SDK's own client. If an SDK upgrade makes one of these fail, that paragraph is to be
// checked again: the SDK may then list, or let us answer, what it cannot today.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterEach, describe, expect, it } from 'vitest';
import { parseParams } from '../../src/domain/params.js';
import { TOOLS, type ToolDef } from '../../src/mcp/tools.js';
import { OPERATIONS, type Operation } from '../../src/transport/operations.js';

const toolNamed = (name: string): ToolDef => TOOLS.find((t) => t.name === name)!;
const operationOf = (name: string) => OPERATIONS.find((o): o is Operation => 'tools' in o && !!o.tools?.some((t) => t.name === name))!;

let client: Client | undefined;
afterEach(async () => client?.close());

/** A server with tools registered the way the SDK's documentation shows: their real zod arguments. */
async function serve(tools: ToolDef[], seen: (args: Record<string, unknown>) => void = () => undefined): Promise<Client> {
  const server = new McpServer({ name: 'sdk-validation', version: '1.0.0' });
  for (const tool of tools) {
    server.registerTool(tool.name, { inputSchema: tool.input }, async (args: Record<string, unknown>) => {
      seen(args);
      return { content: [{ type: 'text', text: 'ran' }] };
    });
  }
  const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
  client = new Client({ name: 'vcon-mcp-tests', version: '1.0.0' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  return client;
}

describe('McpServer given the domain schemas', () => {
  it.each(['create_vcon', 'add_analysis'])('cannot list %s: a field that must be absent fails the whole tools/list', async (name) => {
    const c = await serve([toolNamed(name)]);
    await expect(c.listTools()).rejects.toThrow(/Undefined cannot be represented in JSON Schema/);
  });

  it('refuses a bad argument with text only: zod messages and the field, but no code and no structuredContent', async () => {
    const c = await serve([toolNamed('get_vcon'), toolNamed('create_vcon')]);
    const r = await c.callTool({ name: 'get_vcon', arguments: { uuid: 42 } });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toBeUndefined();
    expect(r.content).toEqual([
      {
        type: 'text',
        text: 'MCP error -32602: Input validation error: Invalid arguments for tool get_vcon: must be a UUID (8-4-4-4-12 hexadecimal digits), got "42" at uuid',
      },
    ]);
    // A missing document argument: the union refusing `undefined`, where the tool names what is missing.
    const noVcon = await c.callTool({ name: 'create_vcon', arguments: {} });
    expect(noVcon.content).toEqual([
      { type: 'text', text: 'MCP error -32602: Input validation error: Invalid arguments for tool create_vcon: Invalid input at vcon' },
    ]);
  });

  it("hands the handler zod's output, which the service's own parse (REST's) refuses", async () => {
    let got: Record<string, unknown> = {};
    const c = await serve([toolNamed('search_vcons')], (args) => (got = args));
    await c.callTool({ name: 'search_vcons', arguments: { start_date: '2024-01-01' } });
    expect(got.start_date).toBeInstanceOf(Date);
    expect(() => parseParams(operationOf('search_vcons').query!, got)).toThrow(/start_date: must be a date/);
  });
});
