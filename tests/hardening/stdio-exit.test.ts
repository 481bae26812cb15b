// How fast a stdio server leaves when its client closes stdin (what Claude Desktop does): it must
// be gone before the SDK's close() would SIGTERM it (2 s). A duration, so it lives here and not in
// the functional suite (tests/mcp/stdio.test.ts checks that it exits cleanly by itself).
import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { packageRoot } from '../../src/paths.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { SERVER } from './helpers.js';

const schema = testSchemaName('stdioexit');

afterAll(async () => {
  const admin = adminSql();
  await admin.unsafe(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('a stdio server whose client closes stdin', () => {
  it('exits by itself, three times out of three', async () => {
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [SERVER],
        cwd: packageRoot,
        stderr: 'ignore',
        env: { PATH: process.env.PATH ?? '', MCP_TRANSPORT: 'stdio', DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema, LOG_LEVEL: 'warn' },
      });
      const client = new Client({ name: 'vcon-hardening', version: '1.0.0' });
      await client.connect(transport);
      await client.listTools();
      const child = (transport as unknown as { _process: ChildProcess })._process;
      const exited = new Promise<{ at: number; code: number | null; signal: string | null }>((resolve) =>
        child.once('exit', (code, signal) => resolve({ at: performance.now(), code, signal })),
      );
      const t0 = performance.now();
      (child.stdin as NodeJS.WritableStream).end();
      const exit = await exited;
      // Nobody signals it (the client is closed only after it exited): code 0 is its own exit.
      expect(exit).toMatchObject({ code: 0, signal: null });
      times.push(Math.round(exit.at - t0));
      await client.close();
    }
    // How long it took is a figure, not a bound (a loaded machine stretches it).
    console.log(`[hardening] stdio exit after stdin closed: ${JSON.stringify(times)} ms`);
  }, 120_000);
});
