// vcon-launch dump: a group's vCons as NDJSON on stdout (GET /vcons/export), the file `import`
// reads back. Through the running instance when there is one, otherwise a temporary one.
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { Command } from 'commander';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroup, resolveDir, type GroupSpec } from '../groups.js';
import { addEnvDirFlag, addInstancesDirFlag } from '../options.js';
import { createRegistry } from '../registry.js';
import { startTemporary } from './import.js';

export interface DumpReport {
  group: string;
  vcons: number;
  bytes: number;
  seconds: number;
  /** The uuid of the last vCon written: `--after` resumes after it. */
  last: string | null;
}

/** The headers of the group's key for reading: a read-only key when there is one (a dump writes nothing). */
function readHeaders(spec: GroupSpec): Record<string, string> {
  const { required, keys, readOnlyKeys, header } = spec.config.auth;
  if (!required) return {};
  const key = readOnlyKeys[0] ?? keys[0];
  if (!key) throw new UserError(`group ${spec.name} requires authentication but has no API_KEYS or API_KEYS_READONLY; dump needs a key`);
  return header === 'authorization' ? { authorization: `Bearer ${key}` } : { [header]: key };
}

/** The uuid of one exported line (the document's own). */
const uuidOf = (line: string): string | null => {
  try {
    const doc = JSON.parse(line) as { uuid?: unknown; header?: unknown };
    return typeof doc.uuid === 'string' ? doc.uuid : null;
  } catch {
    return null;
  }
};

/** Streams GET /vcons/export into `out`, honouring its backpressure; a progress line on stderr when asked. */
export async function dumpGroup(
  opts: { group: string; envDir: string; instancesDir: string; after?: string; progress?: boolean },
  out: Writable,
  launcher: LauncherEnvironment,
): Promise<DumpReport> {
  const spec = loadGroup(opts.group, resolveDir(opts.envDir), launcher);
  const headers = readHeaders(spec);
  const running = createRegistry(resolveDir(opts.instancesDir)).get(spec.name);
  if (!running && !spec.config.rest.enabled) throw new UserError(`group ${spec.name} has REST_API_ENABLED=false; dump needs the REST API`);
  const temporary = running ? undefined : await startTemporary(spec, opts.instancesDir, launcher);
  const api = running ? `${running.url}${running.api_base_path ?? spec.config.rest.basePath}` : temporary!.api;
  const t0 = Date.now();
  let vcons = 0;
  let bytes = 0;
  /** The text after the last newline seen, and the last complete line. */
  let partial = '';
  let lastLine = '';
  let shown = 0;
  const show = (final = false) => {
    if (!opts.progress || (!final && Date.now() - shown < 200)) return;
    shown = Date.now();
    const s = (Date.now() - t0) / 1000;
    process.stderr.write(
      `\rdumped ${vcons} vCons · ${(bytes / 1024 ** 2).toFixed(1)} MB · ${s > 0 ? (vcons / s).toFixed(0) : 0}/s   ${final ? '\n' : ''}`,
    );
  };
  try {
    const query = opts.after ? `?after=${encodeURIComponent(opts.after)}` : '';
    const res = await fetch(`${api}/vcons/export${query}`, { headers });
    if (!res.ok || !res.body) {
      const text = await res.text();
      let message = text.slice(0, 300);
      try {
        const body = JSON.parse(text) as { error?: string; message?: string };
        message = `${body.error}: ${body.message}`;
      } catch {
        /* not JSON */
      }
      throw new UserError(`the server refused the dump (${res.status} ${message})`);
    }
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body) {
        bytes += chunk.byteLength;
        const text = partial + decoder.decode(chunk, { stream: true });
        const end = text.lastIndexOf('\n');
        if (end >= 0) {
          let n = 0;
          for (let i = text.indexOf('\n'); i >= 0 && i <= end; i = text.indexOf('\n', i + 1)) n++;
          vcons += n;
          lastLine = text.slice(text.lastIndexOf('\n', end - 1) + 1, end);
          partial = text.slice(end + 1);
          if (!out.write(text.slice(0, end + 1))) await once(out, 'drain');
        } else {
          partial = text;
        }
        show();
      }
    } catch (err) {
      const last = lastLine ? uuidOf(lastLine) : null;
      throw new UserError(
        `the export stream broke after ${vcons} vCon(s) (${(err as Error).message})${last ? `; resume with --after ${last} (append to the file)` : ''}`,
      );
    }
    if (partial !== '') throw new UserError(`the export stream ended inside a line after ${vcons} vCon(s)`);
    show(true);
  } finally {
    await temporary?.stop();
  }
  return { group: spec.name, vcons, bytes, seconds: (Date.now() - t0) / 1000, last: lastLine ? uuidOf(lastLine) : null };
}

/** Wires `vcon-launch dump`. */
export function registerDump(program: Command): void {
  const cmd = program
    .command('dump')
    .description("write every vCon of a group as NDJSON (one per line), the file `import` reads back: the tenant's data out")
    .requiredOption('--group <name>', 'the group to dump')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .option('--after <uuid>', 'resume after this vCon uuid (the last line of a broken dump)');
  addEnvDirFlag(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: { group: string; envDir: string; instancesDir: string; output?: string; after?: string }) => {
    const launcher = readLauncherEnvironment();
    const out = opts.output ? createWriteStream(opts.output, { flags: opts.after ? 'a' : 'w', mode: 0o600 }) : process.stdout;
    // A progress line on stderr whenever stderr is a terminal, even when stdout is a file.
    const report = await dumpGroup({ ...opts, progress: process.stderr.isTTY === true }, out, launcher);
    if (out !== process.stdout)
      await new Promise<void>((resolve, reject) =>
        (out as ReturnType<typeof createWriteStream>).end((err?: Error | null) => (err ? reject(err) : resolve())),
      );
    process.stderr.write(
      `dumped ${report.vcons} vCon(s) of group ${report.group} (${(report.bytes / 1024 ** 2).toFixed(1)} MB) in ${report.seconds.toFixed(1)} s\n`,
    );
  });
}
