// The one mapping between service outcomes and MCP results. Tool failures are results with
// `isError: true` carrying the error codes of REST (docs/api.md "Envelopes"); resource failures are
// JSON-RPC errors with the same code in their message and data.
import { McpError, ErrorCode, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isInstance } from '../domain/errors.js';
import type { Logger } from '../logger.js';
import { toErrorBody, type ErrorContent } from '../transport/errors.js';

/** Structured error content of a failed tool call: the REST error body without `success`. */
export type ToolErrorContent = ErrorContent;

export interface ResultOptions {
  production: boolean;
  log: Logger;
}

/** MCP's JSON-RPC code for a missing resource (MCP specification, "Resources: error handling"). */
export const RESOURCE_NOT_FOUND = -32002;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A successful tool result: the value as structured content plus the same JSON as text. */
export function toToolResult(value: unknown): CallToolResult {
  // structuredContent must be an object; other values (a plugin tool's string, an array) are wrapped.
  const structured = isRecord(value) ? value : { result: value ?? null };
  return {
    structuredContent: structured,
    content: [{ type: 'text', text: JSON.stringify(structured, null, 2) }],
  };
}

/** Any thrown value as the REST error body (the shared mapping, src/transport/errors.ts). Never throws. */
export function toErrorContent(err: unknown, opts: ResultOptions): { status: number; body: ToolErrorContent } {
  return (
    toErrorBody(err, { ...opts, logFields: { transport: 'mcp' } }) ?? {
      status: 500,
      body: { error: 'internal_error', message: 'An unexpected error occurred' },
    }
  );
}

/** A failed tool call: text `code: message` (with details) and the structured error body. */
export function toToolError(err: unknown, opts: ResultOptions): CallToolResult {
  const { body } = toErrorContent(err, opts);
  const lines = [`${body.error}: ${body.message}`];
  for (const d of body.details ?? []) lines.push(`  - ${d.path}: ${d.message}`);
  if (body.hint) lines.push(`hint: ${body.hint}`);
  return { isError: true, structuredContent: body, content: [{ type: 'text', text: lines.join('\n') }] };
}

/**
 * A JSON-RPC error whose wire message is exactly `code: message` (McpError would prefix
 * "MCP error -32002:" to it, and the client prefixes that again).
 */
export class ProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: ToolErrorContent,
  ) {
    super(message);
    this.name = 'ProtocolError';
  }
}

/** A failed resource read as a JSON-RPC error: 404 → -32002, 4xx → invalid params, else internal. */
export function toProtocolError(err: unknown, opts: ResultOptions): Error {
  if (isInstance(err, McpError) || isInstance(err, ProtocolError)) return err;
  const { status, body } = toErrorContent(err, opts);
  const code = status === 404 ? RESOURCE_NOT_FOUND : status >= 400 && status < 500 ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  return new ProtocolError(code, `${body.error}: ${body.message}`, body);
}
