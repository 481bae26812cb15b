// Keys change without a restart (Instance.reloadKeys, what `vcon-launch reload` sends over IPC):
// a removed key is refused at once on REST, /metrics and MCP, and the MCP sessions it opened are
// closed; a new key works; an invalid value changes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, KEY, RO_KEY, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';

const NEW_KEY = 'rotated-key-rw-2';
const METRICS_KEY = 'a-scraper-key-of-16+';
let srv: TestServer;

beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => {
  await srv?.close();
});

const status = async (key: string, path = '/vcons') => (await srv.api(path, { key })).status;
const metrics = async (key: string) =>
  (await fetch(`${srv.instance.url}/metrics`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(30_000) })).status;

describe('reloading keys', () => {
  let oldSession: HttpSession;
  let roSession: HttpSession;

  it('takes new keys: the removed one is refused on its next request, its MCP session closed', async () => {
    oldSession = await connectHttp(srv.instance.url!, KEY);
    roSession = await connectHttp(srv.instance.url!, RO_KEY);
    expect((await oldSession.call('list_vcons')).isError).toBeFalsy();
    expect(await status(KEY)).toBe(200);

    const r = await srv.instance.reloadKeys({ API_KEYS: NEW_KEY, API_KEYS_READONLY: RO_KEY, METRICS_KEY });
    expect(r).toEqual({ keys: 1, readOnlyKeys: 1, metricsKey: true, sessionsClosed: 1 });

    expect(await status(KEY)).toBe(401);
    expect(await status(NEW_KEY)).toBe(200);
    expect(await status(RO_KEY)).toBe(200);
    expect(await metrics(KEY)).toBe(401);
    expect(await metrics(METRICS_KEY)).toBe(200);
    // The session of the removed key is refused (its key first, and the session is gone); the read-only key's stays.
    await expect(oldSession.call('list_vcons')).rejects.toThrow(/API key invalid/);
    expect((await roSession.call('list_vcons')).isError).toBeFalsy();
    expect(srv.instance.mcp!.stats()).toMatchObject({ sessions: 1, read: 1, write: 0 });
    // A new session needs a valid key: the old one is refused (403 on /mcp), the new one opens.
    await expect(connectHttp(srv.instance.url!, KEY)).rejects.toThrow(/403|API key invalid/);
    const fresh = await connectHttp(srv.instance.url!, NEW_KEY);
    expect((await fresh.call('list_vcons')).isError).toBeFalsy();
    await fresh.close();
  });

  it("closes a session whose key's scope changed", async () => {
    const r = await srv.instance.reloadKeys({ API_KEYS: NEW_KEY, API_KEYS_READONLY: '' });
    expect(r).toMatchObject({ readOnlyKeys: 0, metricsKey: false, sessionsClosed: 1 });
    expect(await status(RO_KEY)).toBe(401);
    expect(await metrics(METRICS_KEY)).toBe(401);
  });

  it('refuses an invalid value and keeps the keys it had', async () => {
    await expect(srv.instance.reloadKeys({ API_KEYS: KEY, METRICS_KEY: 'short' })).rejects.toThrow(/METRICS_KEY: must be at least 16 characters/);
    expect(await status(NEW_KEY)).toBe(200);
    expect(await status(KEY)).toBe(401);
  });
});
