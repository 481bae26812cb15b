// Patches postgres.js 3.4.9 (run by `prepare`, after every install) against a crash: when the
// server closes a connection while a transaction holds it, the ROLLBACK that sql.begin sends is
// written to a socket that is already gone, and the TypeError thrown from a setImmediate kills
// the process (porsager/postgres#1154, #1208; upstream fix PR #1209). The patch rejects such a
// query with CONNECTION_CLOSED instead, which the service answers as 503.
// It changes nothing when the code is already patched or is not the version it was written for.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const MARK = '/* vcon-launch: closed-socket guard */';
const patches = [
  {
    from: `  function execute(q) {
    if (terminated)
      return queryError(q, Errors.connection('CONNECTION_DESTROYED', options))
`,
    to: `  function execute(q) {
    if (terminated)
      return queryError(q, Errors.connection('CONNECTION_DESTROYED', options))

    ${MARK}
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
];

for (const file of ['node_modules/postgres/src/connection.js', 'node_modules/postgres/cjs/src/connection.js']) {
  if (!existsSync(file)) continue;
  let text = readFileSync(file, 'utf8');
  if (text.includes(MARK)) continue;
  if (!patches.every((p) => text.includes(p.from))) {
    console.warn(`patch-postgres: ${file} is not the postgres.js 3.4.9 this patch was written for; left unchanged`);
    continue;
  }
  for (const p of patches) text = text.replace(p.from, p.to);
  writeFileSync(file, text);
  console.log(`patch-postgres: guarded ${file} against writes to a closed socket`);
}
