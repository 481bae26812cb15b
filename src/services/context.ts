/** What a key may do: read-only keys call reads only, on REST and MCP alike. */
export type Scope = 'read' | 'write';

/** Who is asking, passed to every service call and every plugin hook. */
export interface RequestCtx {
  /** 'rest' | 'mcp' | 'cli' | 'internal' */
  transport: 'rest' | 'mcp' | 'cli' | 'internal';
  scope: Scope;
  keyId: string | null;
  requestId?: string;
}

export const internalCtx: RequestCtx = { transport: 'internal', scope: 'write', keyId: null };
