// The MCP SDK reads the caller's identity from `req.auth` (it reaches tool handlers as
// `extra.authInfo`); src/mcp/http.ts sets it after the REST key check.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';

declare global {
  namespace Express {
    interface Request {
      auth?: AuthInfo;
    }
  }
}

export {};
