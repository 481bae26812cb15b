// The stdio transport's input, line by line, held to the same JSON rules as REST and MCP over HTTP
// (transport/json-body.ts): the SDK parses each line with JSON.parse itself, which keeps the last of
// a repeated field name, rounds numbers a double can't hold and replaces invalid UTF-8. A line that
// breaks a rule is answered here with a JSON-RPC error (the request's id when it has one, so the
// client's call ends instead of waiting) and never reaches the SDK.
import { Transform, type TransformCallback } from 'node:stream';
import { checkJsonValues } from '../domain/elements.js';
import { checkJsonBytes, checkUniqueMembers } from '../domain/exact-json.js';

const NEWLINE = 0x0a;

/** The id of a JSON-RPC request line, or null (a notification, or a line that isn't JSON). */
function idOf(line: Buffer): string | number | null {
  try {
    const id = (JSON.parse(line.toString('utf8')) as { id?: unknown })?.id;
    return typeof id === 'string' || typeof id === 'number' ? id : null;
  } catch {
    return null;
  }
}

/** Why a line is refused, or undefined when it may pass (the SDK reports plain syntax errors itself). */
function refusal(line: Buffer, maxElements: number): string | undefined {
  try {
    const members = checkJsonValues(line, maxElements);
    checkJsonBytes(line, 'utf-8', 'message');
    let value: unknown;
    try {
      value = JSON.parse(line.toString('utf8'));
    } catch {
      return undefined;
    }
    checkUniqueMembers(value, members, line, 'utf-8', 'message');
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * A stream to hand the SDK's StdioServerTransport instead of stdin: it passes the lines that keep the
 * rules and answers the others on `reply` with -32700 (the one code JSON-RPC has for a message that
 * can't be read as sent).
 */
export function checkedStdin(maxElements: number, reply: (line: string) => void): Transform {
  let pending: Buffer[] = [];
  const check = (line: Buffer, push: (b: Buffer) => void) => {
    const body = line.length && line[line.length - 1] === 0x0d ? line.subarray(0, -1) : line;
    const why = body.length ? refusal(body, maxElements) : undefined;
    if (why === undefined) push(Buffer.concat([line, Buffer.from([NEWLINE])]));
    else reply(JSON.stringify({ jsonrpc: '2.0', id: idOf(body), error: { code: -32700, message: `Parse error: ${why}` } }) + '\n');
  };
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      let from = 0;
      for (let nl = chunk.indexOf(NEWLINE); nl !== -1; nl = chunk.indexOf(NEWLINE, from)) {
        const part = chunk.subarray(from, nl);
        const line = pending.length ? Buffer.concat([...pending, part]) : part;
        pending = [];
        check(line, (b) => this.push(b));
        from = nl + 1;
      }
      if (from < chunk.length) pending.push(chunk.subarray(from));
      done();
    },
    flush(done: TransformCallback) {
      // A last line without its newline is passed as the SDK would see it: unterminated, never parsed.
      if (pending.length) this.push(Buffer.concat(pending));
      done();
    },
  });
}
