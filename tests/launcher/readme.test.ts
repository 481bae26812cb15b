// Documented examples run as printed: the plugin example of docs/plugins.md starts what it means to
// show (a group with keys over HTTP whose reads are redacted), and the README's batch example's answer
// has the shape the server really gives a rejected item.
import { chmodSync, copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { startTestServer } from '../helpers/server.js';
import { createWorkspace, type Workspace } from './helpers.js';

const README = readFileSync(path.join(packageRoot, 'README.md'), 'utf8');
const PLUGINS = readFileSync(path.join(packageRoot, 'docs', 'plugins.md'), 'utf8');
const section = (title: string) => README.slice(README.indexOf(`\n## ${title}\n`), README.indexOf('\n## ', README.indexOf(`\n## ${title}\n`) + 4));

describe('README and docs examples', () => {
  let ws: Workspace | undefined;
  afterAll(async () => {
    await ws?.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('the plugin example starts a keyed HTTP group whose reads are redacted as docs/plugins.md shows', async () => {
    const block = PLUGINS;
    const env = /cat > env\/(\w+)\.env <<'END'\n([\s\S]*?)\nEND/.exec(block);
    expect(env, 'docs/plugins.md creates a group env file').not.toBeNull();
    const [, group, lines] = env!;
    const vars = Object.fromEntries(lines.split('\n').map((l) => l.split(/=(.*)/s).slice(0, 2)));
    ws = createWorkspace([group], { [group]: vars });
    // The example's relative plugin path, as it resolves in a clone.
    mkdirSync(path.join(ws.dir, 'scripts', 'plugins'), { recursive: true });
    // A clone others can read, as a launcher running as root needs when each group runs as its own user.
    chmodSync(ws.dir, 0o755);
    copyFileSync(path.join(packageRoot, vars.VCON_PLUGINS_PATH), path.join(ws.dir, vars.VCON_PLUGINS_PATH));
    expect(block).toContain(`npx vcon-launch start --group ${group} --detach`);
    const started = await ws.run(['start', '--group', group, '--detach']);
    expect(started.exitCode, started.stderr).toBe(0);
    const api = `${ws.registry()[group].url}/api/v1`;
    const auth = { authorization: `Bearer ${vars.API_KEYS}` };
    const body = /-d '(\{.*\})'/.exec(block)![1];
    const created = await fetch(`${api}/vcons`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body });
    expect(created.status).toBe(201);
    const { uuid } = (await created.json()) as { uuid: string };
    const read = (await (await fetch(`${api}/vcons/${uuid}`, { headers: auth })).json()) as any;
    const shown = /"tel":"([^"]+)", subject "([^"]+)"/.exec(block)!;
    expect(read.vcon.parties[0].tel).toBe(shown[1]);
    expect(read.vcon.subject).toBe(shown[2]);
  });

  test('the batch example shows a rejected item as the server answers it', async () => {
    const block = section('The REST API');
    const request = /\$API\/vcons\/batch -H 'Content-Type: application\/json' -d '(\[.*\])'/.exec(block)![1];
    const s = await startTestServer();
    try {
      const r = await s.api('/vcons/batch', { method: 'POST', body: request, headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(207);
      const rejected = r.body.results[1];
      // README prints the item's first keys exactly as the server orders them.
      const shown = `{"index":1,"uuid":${JSON.stringify(rejected.uuid)},"status":400,"error":"${rejected.error}",`;
      expect(block).toContain(shown);
    } finally {
      await s.close();
    }
  });
});
