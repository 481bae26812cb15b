import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../src/config.js';

describe('config', () => {
  it('applies the documented defaults', () => {
    const c = parseConfig({});
    expect(c.rest).toMatchObject({ enabled: true, basePath: '/api/v1', bodyLimit: 20 * 1024 * 1024 });
    expect(c.mcp).toMatchObject({ transport: 'stdio', host: '127.0.0.1', port: 3000, readOnly: false });
    expect(c.cors.origins).toBe('*');
    expect(c.auth).toEqual({ required: true, keys: [], readOnlyKeys: [], header: 'authorization' });
    expect(c.db.schema).toBe('public');
    expect(c.label).toBeNull();
    expect(c.db.url).toBeUndefined();
  });

  it('splits the pool once: DB_POOL_MAX into requests and the index thread, analyze connections beside it', () => {
    expect(parseConfig({}).db.pool).toEqual({ size: 10, requests: 9, index: 1, analyze: 4 });
    expect(parseConfig({ DB_POOL_MAX: '6', DB_ANALYZE_CONNECTIONS: '1' }).db.pool).toEqual({ size: 6, requests: 5, index: 1, analyze: 1 });
    // A pool of one has no index thread: indexing takes turns on the request pool.
    expect(parseConfig({ DB_POOL_MAX: '1', DB_ANALYZE_CONNECTIONS: '0' }).db.pool).toEqual({ size: 1, requests: 1, index: 0, analyze: 0 });
    expect(parseConfig({ DB_POOLER: 'pgbouncer' }).db.pool).toMatchObject({ size: 20, requests: 19, index: 1 });
  });

  it('honours port 0 and parses lists, booleans and the URL alias', () => {
    const c = parseConfig({
      MCP_HTTP_PORT: '0',
      API_KEYS: ' a, b ,,c',
      API_KEYS_READONLY: 'r',
      API_AUTH_REQUIRED: 'false',
      REST_API_ENABLED: 'FALSE',
      API_KEY_HEADER: 'X-API-Key',
      CORS_ORIGIN: 'https://a.example.com, https://b.example.com/',
      SUPABASE_DB_URL: 'postgres://u@h:5432/d',
      SUPABASE_DB_SCHEMA: 'group_a',
      VCON_INSTANCE_LABEL: 'Group A',
      REST_API_BASE_PATH: '/v2/',
    });
    expect(c.mcp.port).toBe(0);
    expect(c.auth.keys).toEqual(['a', 'b', 'c']);
    expect(c.auth.readOnlyKeys).toEqual(['r']);
    expect(c.auth.required).toBe(false);
    expect(c.rest.enabled).toBe(false);
    expect(c.rest.basePath).toBe('/v2');
    expect(c.auth.header).toBe('x-api-key');
    expect(c.cors.origins).toEqual(['https://a.example.com', 'https://b.example.com']);
    expect(c.db.url).toBe('postgres://u@h:5432/d');
    expect(c.db.schema).toBe('group_a');
    expect(c.label).toBe('Group A');
  });

  it('lists every bad variable in one error', () => {
    let err: unknown;
    try {
      parseConfig({ MCP_HTTP_PORT: '70000', MCP_TRANSPORT: 'carrier-pigeon', SUPABASE_DB_SCHEMA: 'Bad-Name', API_AUTH_REQUIRED: 'maybe' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const vars = (err as ConfigError).problems.map((p) => p.variable).sort();
    expect(vars).toEqual(['API_AUTH_REQUIRED', 'MCP_HTTP_PORT', 'MCP_TRANSPORT', 'SUPABASE_DB_SCHEMA']);
    expect((err as Error).message).toMatch(/MCP_HTTP_PORT: must be between 0 and 65535/);
    expect((err as Error).message).toMatch(/SUPABASE_DB_SCHEMA: must be a PostgreSQL identifier/);
  });

  it.each(['pg_catalog', 'extensions', '1abc', 'a'.repeat(64), 'with space', 'x"; drop schema y; --'])('rejects schema %j', (schema) => {
    expect(() => parseConfig({ SUPABASE_DB_SCHEMA: schema })).toThrow(ConfigError);
  });

  it('loads ENV_FILE without overriding variables already set', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cfg-'));
    const file = path.join(dir, 'g.env');
    writeFileSync(file, 'SUPABASE_DB_SCHEMA=from_file\nVCON_INSTANCE_LABEL=file label\nMCP_HTTP_PORT=4000\n');
    const c = loadConfig({ ENV_FILE: file, MCP_HTTP_PORT: '0' });
    expect(c.db.schema).toBe('from_file');
    expect(c.label).toBe('file label');
    expect(c.mcp.port).toBe(0);
    expect(() => loadConfig({ ENV_FILE: path.join(dir, 'missing.env') })).toThrow(/ENV_FILE: cannot read/);
  });

  it('takes the index thread nice value from 0 to 19, 10 by default', () => {
    expect(parseConfig({}).db.indexThreadNice).toBe(10);
    expect(parseConfig({ INDEX_THREAD_NICE: '0' }).db.indexThreadNice).toBe(0);
    expect(parseConfig({ INDEX_THREAD_NICE: '19' }).db.indexThreadNice).toBe(19);
    expect(() => parseConfig({ INDEX_THREAD_NICE: '20' })).toThrow(/INDEX_THREAD_NICE/);
    expect(() => parseConfig({ INDEX_THREAD_NICE: '-5' })).toThrow(/INDEX_THREAD_NICE/);
  });

  it('rejects a non-postgres DATABASE_URL and a bad body limit', () => {
    expect(() => parseConfig({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL/);
    expect(() => parseConfig({ REST_API_BODY_LIMIT: 'lots' })).toThrow(/REST_API_BODY_LIMIT/);
    expect(parseConfig({ REST_API_BODY_LIMIT: '512kb' }).rest.bodyLimit).toBe(512 * 1024);
  });
});
