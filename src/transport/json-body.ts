// What every JSON request body must keep before it is parsed, shared by REST and MCP over HTTP.
import { checkBodyValues } from '../domain/elements.js';
import { checkJsonBytes, checkUniqueMembers } from '../domain/exact-json.js';

/** What verify counted of a body, until the parse is checked against it. */
const counted = new WeakMap<object, { members: number; buf: Buffer; encoding: string }>();

/**
 * body-parser's `verify` for every JSON body (REST and MCP over HTTP): at most `maxElements` JSON
 * values (counted on the bytes, before the parse), then bytes stored exactly (UTF-8, and numbers
 * a double holds exactly). The members counted are compared after the parse (checkParsedBody).
 */
export function jsonBodyVerify(maxElements: number) {
  return (req: object, _res: unknown, buf: Buffer, encoding: string): void => {
    const members = checkBodyValues(buf, encoding, maxElements);
    checkJsonBytes(buf, encoding);
    counted.set(req, { members, buf, encoding });
  };
}

/**
 * After body-parser parsed a body jsonBodyVerify passed: a ValidationError naming the path when
 * the body repeated a field name in one object (the parse kept only the last), else undefined.
 */
export function checkParsedBody(req: { body?: unknown }): Error | undefined {
  const c = counted.get(req);
  if (!c) return undefined;
  counted.delete(req);
  try {
    checkUniqueMembers(req.body, c.members, c.buf, c.encoding);
    return undefined;
  } catch (err) {
    return err as Error;
  }
}
