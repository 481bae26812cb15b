// Patches postgres.js 3.4.9 against upstream bugs, from `postinstall` (so installs of this
// package from the registry run it too, and it is in `files`):
//
// 1. closed-socket guard (porsager/postgres#1154, #1208; upstream PR #1209): when the server closes
//    a connection while a transaction holds it, the ROLLBACK that sql.begin sends is written to a
//    socket that is already gone and the TypeError thrown from a setImmediate kills the process.
//    Patched: such a query is rejected with CONNECTION_CLOSED, which the service answers as 503.
// 2. row-count reset (porsager/postgres#1119, #1181; upstream PRs #1120, #1190): a query that fails
//    after some of its rows arrived leaves the connection's row counter where it stopped, and the
//    next query on that pooled connection resolves with holes in front of its rows: a wrong answer
//    to someone else's request. Patched: the counter is reset when every query ends.
// 3. reserve before the pipeline check (vcon-launch, issue 15): sql.begin reserves its connection
//    in execute() only when the connection could take another pipelined query, so with
//    max_pipeline 0 (or a full socket buffer) BEGIN fails with UNSAFE_TRANSACTION. Behind
//    PgBouncer the service needs max_pipeline 0 (src/db/client.ts says why). Patched: the
//    reservation happens whatever the pipeline state; the return value is unchanged.
// 4. TCP_NODELAY (vcon-launch, issue 17): postgres.js leaves Nagle's algorithm on, so the small
//    message written after a COPY (CopyDone, then the next query) waited for the server's delayed
//    ACK: ~40 ms per COPY on Linux, three times in every indexing round. libpq sets TCP_NODELAY
//    too. Only speed depends on it, so src/db/client.ts does not refuse a driver without it.
// 5. type-fetch rejection (porsager/postgres#1192, #1205, #279): every new connection first reads
//    the array types with an internal query whose promise nobody awaits, so when that query fails
//    (the connection lost or refused mid-handshake, a cancel, PgBouncer's query_wait_timeout) the
//    rejection is unhandled and Node ends the process. Patched: the rejection is caught there (the
//    connection's own error path has already failed or retried the queries that waited on it).
// 6. one-copy bind (vcon-launch, issue 17): a Bind message was built in a 256-byte buffer grown by
//    half again each time it filled (a batch statement's ~700 KB of parameters: ~20 buffers and
//    twice its size copied), then copied into a Buffer.concat with Execute, then copied again by
//    write(). Patched: Bind sizes its message first (the byte length of every serialised parameter)
//    and writes it, with Execute behind it, into one buffer; write() keeps a large message as it is.
//    The bytes sent are the same. Speed only, so src/db/client.ts does not refuse a driver without it.
//
// The file is found the way Node finds it (import.meta.resolve from this script), so a hoisted or
// nested install is patched alike. Anything but the version this was written for, unless already
// patched, fails the install: a silent skip would ship the bugs. Remove this script when upstream
// releases both fixes (and src/db/client.ts's startup check with it).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';

export const PINNED_VERSION = '3.4.9';

/** The copies of connection.js Node can load: ESM (import) and CommonJS (require). */
export const CONNECTION_FILES = ['src/connection.js', 'cjs/src/connection.js'];

export const PATCHES = [
  {
    name: 'closed-socket guard (#1208)',
    mark: '/* vcon-launch: closed-socket guard */',
    edits: [
      {
        from: `  function execute(q) {
    if (terminated)
      return queryError(q, Errors.connection('CONNECTION_DESTROYED', options))
`,
        to: `  function execute(q) {
    if (terminated)
      return queryError(q, Errors.connection('CONNECTION_DESTROYED', options))

    /* vcon-launch: closed-socket guard */
    if (!socket)
      return queryError(q, Errors.connection('CONNECTION_CLOSED', options))
`,
      },
      {
        from: `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`,
        to: `  function nextWrite(fn) {
    if (!socket) {
      chunk = nextWriteTimer = null
      return false
    }
    const x = socket.write(chunk, fn)`,
      },
    ],
  },
  {
    name: 'row-count reset (#1119, #1181)',
    mark: '/* vcon-launch: row-count reset */',
    edits: [
      {
        from: `    query = results = errorResponse = null
    result = new Result()
`,
        to: `    query = results = errorResponse = null
    result = new Result()
    rows = 0 /* vcon-launch: row-count reset */
`,
      },
    ],
  },
  {
    name: 'type-fetch rejection (#1192)',
    mark: '/* vcon-launch: type-fetch rejection */',
    edits: [
      {
        from: `        initial.reserve && (initial = null)
        return fetchArrayTypes()
`,
        to: `        initial.reserve && (initial = null)
        return fetchArrayTypes().catch(() => { /* vcon-launch: type-fetch rejection */ })
`,
      },
    ],
  },
  {
    name: 'reserve before the pipeline check',
    mark: '/* vcon-launch: reserve before the pipeline check */',
    edits: [
      {
        from: `      build(q)
      return write(toBuffer(q))
        && !q.describeFirst
        && !q.cursorFn
        && sent.length < max_pipeline
        && (!q.options.onexecute || q.options.onexecute(connection))
`,
        to: `      build(q)
      /* vcon-launch: reserve before the pipeline check */
      const more = write(toBuffer(q))
        && !q.describeFirst
        && !q.cursorFn
        && sent.length < max_pipeline
      q.options.onexecute && q.options.onexecute(connection)
      return more && !q.options.onexecute
`,
      },
    ],
  },
  {
    name: 'TCP_NODELAY',
    mark: '/* vcon-launch: nodelay */',
    edits: [
      {
        // Set before connect: Node applies it to the handle once connected (a Unix socket ignores it).
        from: `        : new net.Socket()
`,
        to: `        : new net.Socket().setNoDelay(true) /* vcon-launch: nodelay */
`,
      },
    ],
  },
  {
    name: 'one-copy bind',
    mark: '/* vcon-launch: one-copy bind */',
    edits: [
      {
        from: `  function Bind(parameters, types, statement = '', portal = '') {
    let prev
      , type

    b().B().str(portal + b.N).str(statement + b.N).i16(0).i16(parameters.length)

    parameters.forEach((x, i) => {
      if (x === null)
        return b.i32(0xFFFFFFFF)

      type = types[i]
      parameters[i] = x = type in options.serializers
        ? options.serializers[type](x)
        : '' + x

      prev = b.i
      b.inc(4).str(x).i32(b.i - prev - 4, prev)
    })

    b.i16(0)

    return b.end()
  }
`,
        to: `  function Bind(parameters, types, statement = '', portal = '', tail) {
    /* vcon-launch: one-copy bind */
    let size = 1 + 4 + Buffer.byteLength(portal) + 1 + Buffer.byteLength(statement) + 1 + 2 + 2 + 2
    parameters.forEach((x, i) => {
      if (x === null)
        return size += 4

      const type = types[i]
      parameters[i] = x = type in options.serializers
        ? options.serializers[type](x)
        : '' + x

      size += 4 + Buffer.byteLength(x)
    })

    const out = Buffer.allocUnsafe(size + (tail ? tail.length : 0))
    out[0] = 66 // B
    out.writeUInt32BE(size - 1, 1)
    let i = 5
    i += out.write(portal, i)
    out[i++] = 0
    i += out.write(statement, i)
    out[i++] = 0
    i = out.writeUInt16BE(0, i)
    i = out.writeUInt16BE(parameters.length, i)
    for (const x of parameters) {
      if (x === null) {
        i = out.writeUInt32BE(0xFFFFFFFF, i)
        continue
      }
      const n = out.write(x, i + 4)
      out.writeUInt32BE(n, i)
      i += 4 + n
    }
    i = out.writeUInt16BE(0, i)
    tail && tail.copy(out, i)
    return out
  }
`,
      },
      {
        from: `  function prepared(q) {
    return Buffer.concat([
      Bind(q.parameters, q.statement.types, q.statement.name, q.cursorName),
      q.cursorFn
        ? Execute('', q.cursorRows)
        : ExecuteUnnamed
    ])
  }
`,
        to: `  function prepared(q) {
    return Bind(q.parameters, q.statement.types, q.statement.name, q.cursorName, q.cursorFn
      ? Execute('', q.cursorRows)
      : ExecuteUnnamed
    )
  }
`,
      },
      {
        from: `  function write(x, fn) {
    chunk = chunk ? Buffer.concat([chunk, x]) : Buffer.from(x)
`,
        to: `  function write(x, fn) {
    // A large message is written at once (below), so it is sent as it is, not copied.
    chunk = chunk ? Buffer.concat([chunk, x]) : x.length >= 1024 ? x : Buffer.from(x)
`,
      },
    ],
  },
];

/** Applies the missing patches to one file's text; throws when a needed edit's anchor is absent. */
export function patchText(text, file = 'connection.js') {
  const applied = [];
  for (const p of PATCHES) {
    if (text.includes(p.mark)) continue;
    for (const e of p.edits) {
      if (!text.includes(e.from)) {
        throw new Error(`patch-postgres: ${file} does not contain the code the "${p.name}" patch edits`);
      }
      text = text.replace(e.from, e.to);
    }
    applied.push(p.name);
  }
  return { text, applied };
}

/** True when a file's text carries every patch. */
export const isPatched = (text) => PATCHES.every((p) => text.includes(p.mark));

/** The installed postgres.js package directory, resolved as Node resolves `import 'postgres'` from here. */
export function postgresRoot() {
  const entry = fileURLToPath(import.meta.resolve('postgres'));
  // The ESM entry is <root>/src/index.js.
  return join(entry, '..', '..');
}

/** Patches the package at root in place; throws on a version it was not written for. */
export function patchPackage(root) {
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const results = [];
  for (const rel of CONNECTION_FILES) {
    const file = join(root, rel);
    const before = readFileSync(file, 'utf8');
    if (isPatched(before)) {
      results.push({ file, applied: [] });
      continue;
    }
    if (version !== PINNED_VERSION) {
      throw new Error(
        `patch-postgres: postgres.js ${version} is installed at ${root}, but the patches were written for ${PINNED_VERSION}. ` +
          `Pin postgres to ${PINNED_VERSION}, or check whether ${version} fixes porsager/postgres#1208, #1181 and #1192 and update scripts/patch-postgres.mjs.`,
      );
    }
    const { text, applied } = patchText(before, file);
    writeFileSync(file, text);
    results.push({ file, applied });
  }
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const root = process.argv[2] ?? postgresRoot();
    for (const r of patchPackage(root)) {
      console.log(r.applied.length ? `patch-postgres: ${r.file}: applied ${r.applied.join(', ')}` : `patch-postgres: ${r.file}: already patched`);
    }
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  }
}
