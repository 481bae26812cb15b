// What every JSON request body must keep before it is parsed, shared by REST and MCP over HTTP.
import { verifyJsonValues } from '../domain/elements.js';
import { checkJsonBytes } from '../domain/exact-json.js';

/**
 * body-parser's `verify` for every JSON body (REST and MCP over HTTP): at most `maxElements` JSON
 * values (counted on the bytes, before the parse), then bytes stored exactly (UTF-8, and numbers
 * a double holds exactly).
 */
export function jsonBodyVerify(maxElements: number) {
  const countValues = verifyJsonValues(maxElements);
  return (req: unknown, res: unknown, buf: Buffer, encoding: string): void => {
    countValues(req, res, buf, encoding);
    checkJsonBytes(buf, encoding);
  };
}
