// Builds one McpServer for one session's scope: a read-only session is not even offered write
// tools, and plugin tools are offered to read-write sessions only, as REST lets read-only keys only read.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Logger } from '../logger.js';
import type { Services } from '../services/index.js';
import type { RequestCtx, Scope } from '../services/context.js';
import type { BuildInfo } from '../version.js';
import { z } from 'zod';
import { ForbiddenError } from '../domain/errors.js';
import { validate, type ValidationMode } from '../domain/vcon.js';
import { advertisedSchema, inputOf, TOOLS, type ToolDef, type ToolEnv } from './tools.js';
import { registerResources } from './resources.js';
import { registerSubscriptions } from './subscriptions.js';
import { toToolError, toToolResult, type ResultOptions } from './result.js';

export interface McpServerDeps {
  services: Services;
  buildInfo: BuildInfo;
  log: Logger;
  production: boolean;
  /** REST base path, reported by get_version. */
  basePath: string;
  /** The group's VCON_VALIDATION: the document arguments advertise its schemas. */
  validation: ValidationMode;
  /** MCP_MAX_SUBSCRIPTIONS: resources one session may be subscribed to at once. */
  maxSubscriptions: number;
}

export interface SessionIdentity {
  scope: Scope;
  keyId: string | null;
  /** Session id (HTTP) or 'stdio', prefixed to request ids in the context. */
  session: string;
}

export const SERVER_NAME = 'vcon-launch';

const INSTRUCTIONS =
  'A store of vCons (virtual conversation records). Discover before filtering: discover_attachment_purposes, ' +
  'discover_analysis_types and get_unique_tags list the values in use; then get_attachments, get_analysis or search_by_tags. ' +
  'Use search_vcons_hybrid to find conversations by what was said, search_vcons to filter by subject, party or date. ' +
  'Resources: vcon://v1/vcons/{uuid} and its /dialog, /analysis, /attachments, /tags; vcon://v1/vcons/recent.';

/** The tools a session of this scope is offered (plugin tools come on top for read-write). */
export function toolsForScope(scope: Scope): ToolDef[] {
  return TOOLS.filter((t) => scope === 'write' || t.scope === 'read');
}

/** One MCP server bound to one caller: every tool and resource runs with that caller's ctx. */
export function buildMcpServer(deps: McpServerDeps, who: SessionIdentity): McpServer {
  const { services, log } = deps;
  const server = new McpServer({ name: SERVER_NAME, title: 'vCon server', version: deps.buildInfo.version }, { instructions: INSTRUCTIONS });
  const opts: ResultOptions = { production: deps.production, log };
  const env: ToolEnv = { services, buildInfo: deps.buildInfo, basePath: deps.basePath };
  const ctxOf = (requestId: string | number): RequestCtx => ({
    transport: 'mcp',
    scope: who.scope,
    keyId: who.keyId,
    requestId: `${who.session}:${requestId}`,
  });

  for (const tool of toolsForScope(who.scope)) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: advertisedSchema(inputOf(tool, deps.validation)),
        annotations: { title: tool.title, ...tool.annotations },
      },
      async (args: Record<string, unknown>, extra) => {
        const ctx = ctxOf(extra.requestId);
        try {
          // Unreachable through listing; kept so a scope mistake can never become a write.
          if (tool.scope === 'write' && ctx.scope !== 'write') throw new ForbiddenError(`${tool.name} needs a read-write key`);
          return toToolResult(await services.admission.run(() => tool.run(args ?? {}, ctx, env)));
        } catch (err) {
          return toToolError(err, opts);
        }
      },
    );
  }

  if (who.scope === 'write') {
    const taken = new Set(TOOLS.map((t) => t.name));
    for (const plugin of services.plugins) {
      for (const pt of plugin.tools ?? []) {
        if (taken.has(pt.name)) {
          log.warn({ plugin: plugin.name, tool: pt.name }, 'plugin tool name already taken; not offered');
          continue;
        }
        taken.add(pt.name);
        const shape = pt.inputSchema ?? {};
        try {
          server.registerTool(
            pt.name,
            { description: pt.description, inputSchema: advertisedSchema(shape), _meta: { plugin: plugin.name, plugin_version: plugin.version } },
            async (args: Record<string, unknown>, extra) => {
              try {
                const parsed = validate(z.looseObject(shape), args ?? {}, `arguments of ${pt.name}`) as Record<string, unknown>;
                return toToolResult(await services.admission.run(async () => pt.handler(parsed, ctxOf(extra.requestId))));
              } catch (err) {
                return toToolError(err, opts);
              }
            },
          );
        } catch (err) {
          // A plugin's schema we can't turn into JSON Schema (another zod major) costs that tool, not the session.
          log.warn({ plugin: plugin.name, tool: pt.name, err: (err as Error).message }, 'plugin tool not offered');
        }
      }
    }
  }

  registerResources(server, { services, opts, ctxOf });
  registerSubscriptions(server, { services, opts, ctxOf, max: deps.maxSubscriptions });
  return server;
}
