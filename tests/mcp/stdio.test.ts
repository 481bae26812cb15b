// MCP over stdio against the built server (`node dist/src/main.js`, as Claude Desktop runs it).
// `npm test` has dist from `npm ci` (prepare); while developing run `npm run build` first.
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { packageRoot } from '../../src/paths.js';
import { getBuildInfo } from '../../src/version.js';
import { TOOLS } from '../../src/mcp/tools.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { PLUGIN_PATH, textOf } from './helpers.js';

const MAIN = path.join(packageRoot, 'dist', 'src', 'main.js');
const schema = testSchemaName('stdio');

interface StdioServer {
  client: Client;
  transport: StdioClientTransport;
  stderr: () => string;
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult & { structuredContent?: any }>;
}

async function spawnServer(env: Record<string, string> = {}): Promise<StdioServer> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MAIN],
    cwd: packageRoot,
    stderr: 'pipe',
    env: {
      PATH: process.env.PATH ?? '',
      MCP_TRANSPORT: 'stdio',
      DATABASE_URL: databaseUrl(),
      SUPABASE_DB_SCHEMA: schema,
      VCON_PLUGINS_PATH: PLUGIN_PATH,
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  let err = '';
  (transport.stderr as PassThrough).on('data', (d: Buffer) => (err += d.toString()));
  const client = new Client({ name: 'vcon-stdio-tests', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    transport,
    stderr: () => err,
    call: async (name, args = {}) => (await client.callTool({ name, arguments: args })) as CallToolResult & { structuredContent?: any },
  };
}

let rw: StdioServer;

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build`);
  rw = await spawnServer();
});

afterAll(async () => {
  await rw?.client.close();
  const admin = adminSql();
  await admin.unsafe(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('MCP over stdio', () => {
  it('speaks only the protocol on stdout, logs on stderr, and advertises the package version', async () => {
    expect(rw.client.getServerVersion()).toMatchObject({ name: 'vcon-launch', version: getBuildInfo().version });
    // Any stray stdout line would have broken the JSON-RPC framing of the calls above and below.
    // Logs are written asynchronously: the line may trail the initialize answer by a moment.
    await vi.waitFor(() => expect(rw.stderr()).toMatch(/"msg":"mcp stdio ready"/), { timeout: 60_000, interval: 20 });
  });

  it('offers every tool and plugin tools in the configured read-write scope, and runs them with hooks', async () => {
    const names = (await rw.client.listTools()).tools.map((t) => t.name);
    expect(names.filter((n) => n !== 'plugin_whoami').sort()).toEqual(TOOLS.map((t) => t.name).sort());
    expect(names).toContain('plugin_whoami');

    const c = await rw.call('create_vcon', { vcon: { subject: 'SECRET-SUBJECT', parties: [{ name: 'Ann' }] } });
    expect(c.structuredContent).toMatchObject({ created: true });
    const uuid = c.structuredContent.uuid;
    // The plugin's afterRead hook redacts on tools and resources alike.
    expect((await rw.call('get_vcon', { uuid })).structuredContent.vcon.subject).toBe('[redacted by mcp-plugin]');
    const res = await rw.client.readResource({ uri: `vcon://v1/vcons/${uuid}` });
    expect(JSON.parse((res.contents[0] as { text: string }).text).subject).toBe('[redacted by mcp-plugin]');
    expect((await rw.call('add_dialog', { uuid, dialog: { type: 'text', body: 'hello', encoding: 'none' } })).structuredContent).toMatchObject({
      index: 0,
    });
    expect((await rw.call('plugin_whoami')).structuredContent).toEqual({ note: null, transport: 'mcp', scope: 'write', keyId: null });

    const missing = await rw.call('delete_vcon', { uuid: '00000000-0000-4000-8000-0000000000bb' });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toBe('vcon_not_found: vCon 00000000-0000-4000-8000-0000000000bb not found');
  });

  it('with MCP_READONLY=true offers read tools only and refuses a forced write', async () => {
    const ro = await spawnServer({ MCP_READONLY: 'true' });
    try {
      const names = (await ro.client.listTools()).tools.map((t) => t.name).sort();
      expect(names).toEqual(
        TOOLS.filter((t) => t.scope === 'read')
          .map((t) => t.name)
          .sort(),
      );
      const forced = await ro.call('create_vcon', { vcon: { subject: 'nope' } });
      expect(forced.isError).toBe(true);
      const list = await ro.call('search_vcons', { subject: 'nope' });
      expect(list.structuredContent.data).toEqual([]);
    } finally {
      await ro.client.close();
    }
  });

  it('holds each line to the REST JSON rules: a repeated field name is refused with the request id, nothing is stored', async () => {
    const child = (rw.transport as unknown as { _process: ChildProcess })._process;
    const answers = new Map<unknown, any>();
    const onmessage = rw.transport.onmessage;
    rw.transport.onmessage = (m: JSONRPCMessage) => {
      if ('id' in m && typeof m.id === 'string' && m.id.startsWith('raw-')) answers.set(m.id, m);
      else onmessage?.(m);
    };
    try {
      const uuid = '0190a1b2-c3d4-7e5f-8a6b-00000000d001';
      const call = (id: string, vcon: string) =>
        `{"jsonrpc":"2.0","id":"${id}","method":"tools/call","params":{"name":"create_vcon","arguments":{"vcon":${vcon}}}}\n`;
      // JSON.parse would keep the second subject and store it.
      (child.stdin as NodeJS.WritableStream).write(call('raw-dup', `{"uuid":"${uuid}","subject":"first","subject":"second"}`));
      await vi.waitFor(() => expect(answers.has('raw-dup')).toBe(true), { timeout: 60_000, interval: 20 });
      const refused = answers.get('raw-dup');
      expect(refused.error.code).toBe(-32700);
      expect(refused.error.message).toMatch(/params\.arguments\.vcon\.subject/);
      expect((await rw.call('get_vcon', { uuid })).isError).toBe(true);
      // The same call without the repeat, written the same way, passes and stores.
      (child.stdin as NodeJS.WritableStream).write(call('raw-ok', `{"uuid":"${uuid}","subject":"second"}`));
      await vi.waitFor(() => expect(answers.has('raw-ok')).toBe(true), { timeout: 60_000, interval: 20 });
      expect(answers.get('raw-ok').result.isError).toBeFalsy();
      expect((await rw.call('get_vcon', { uuid })).structuredContent.vcon.subject).toBe('second');
    } finally {
      rw.transport.onmessage = onmessage;
    }
  });

  it('exits by itself, cleanly, when the client closes stdin', async () => {
    const s = await spawnServer();
    const child = (s.transport as unknown as { _process: ChildProcess })._process;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    // Ending stdin is what Claude Desktop does. Nothing here calls client.close() (which would
    // SIGTERM after 2 s), so exit code 0 without a signal means the server left by itself. How fast
    // it leaves is measured in tests/hardening/stdio-exit.test.ts.
    (child.stdin as NodeJS.WritableStream).end();
    expect(await exited).toEqual({ code: 0, signal: null });
    // The pipe may deliver the last lines a moment after the exit.
    await vi.waitFor(() => expect(s.stderr()).toMatch(/"msg":"mcp stdio session ended"/), { timeout: 60_000, interval: 20 });
    await s.client.close();
  });
});
