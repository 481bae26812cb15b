// MCP resources under vcon://v1/ (versioned like the REST base path). Every read goes through the same service
// calls as the tools and REST, so plugin hooks (redaction, access control) apply here too.
import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { parseUuid } from '../domain/params.js';
import type { RequestCtx } from '../services/context.js';
import type { Services } from '../services/index.js';
import type { DiscoveryKind } from '../services/discovery-service.js';
import { toProtocolError, type ResultOptions } from './result.js';

export const RESOURCE_PREFIX = 'vcon://v1/';
const RECENT_LIMIT = 20;

interface ResourceDeps {
  services: Services;
  opts: ResultOptions;
  ctxOf(requestId: string | number): RequestCtx;
}

const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

function json(uri: URL, value: unknown): ReadResourceResult {
  return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(value, null, 2) }] };
}

/** Registers the vcon://v1/ resources and templates on one server. */
export function registerResources(server: McpServer, deps: ResourceDeps): void {
  const { services, opts, ctxOf } = deps;

  /** Runs a read, turning service errors into JSON-RPC errors with REST's codes. */
  const read = async (uri: URL, requestId: string | number, fn: (ctx: RequestCtx) => Promise<unknown>) => {
    try {
      return json(uri, await services.admission.run(() => fn(ctxOf(requestId))));
    } catch (err) {
      throw toProtocolError(err, opts);
    }
  };

  const listRecent = async (ctx: RequestCtx) => services.vcons.list({ limit: RECENT_LIMIT, format: 'metadata' }, ctx);

  server.registerResource(
    'recent-vcons',
    `${RESOURCE_PREFIX}vcons/recent`,
    { title: 'Recent vCons', description: `The ${RECENT_LIMIT} newest vCons (metadata: uuid, subject, dates, counts)`, mimeType: 'application/json' },
    (uri, extra) => read(uri, extra.requestId, listRecent),
  );

  server.registerResource(
    'vcon',
    new ResourceTemplate(`${RESOURCE_PREFIX}vcons/{uuid}`, {
      // Browsing lists the newest vCons; a uuid outside them can still be read directly.
      list: async (extra) => {
        try {
          const page = await listRecent(ctxOf(extra.requestId));
          return {
            resources: (page.data as { uuid: string; subject?: string | null }[]).map((v) => ({
              uri: `${RESOURCE_PREFIX}vcons/${v.uuid}`,
              name: v.subject ? `${v.subject}` : v.uuid,
              mimeType: 'application/json',
            })),
          };
        } catch (err) {
          throw toProtocolError(err, opts);
        }
      },
    }),
    { title: 'vCon', description: 'A whole vCon document by uuid', mimeType: 'application/json' },
    (uri, vars, extra) => read(uri, extra.requestId, (ctx) => services.vcons.get(parseUuid(one(vars.uuid)), 'full', ctx)),
  );

  const part = (name: string, path: string, description: string, fn: (uuid: string, ctx: RequestCtx) => Promise<unknown>) =>
    server.registerResource(
      name,
      new ResourceTemplate(`${RESOURCE_PREFIX}vcons/{uuid}/${path}`, { list: undefined }),
      { title: description, description, mimeType: 'application/json' },
      (uri, vars, extra) => read(uri, extra.requestId, (ctx) => fn(parseUuid(one(vars.uuid)), ctx)),
    );

  part('vcon-dialog', 'dialog', 'The dialog array of a vCon', async (uuid, ctx) => {
    const doc = await services.vcons.get(uuid, 'full', ctx);
    return Array.isArray(doc.dialog) ? doc.dialog : [];
  });
  part('vcon-analysis', 'analysis', 'The analysis array of a vCon', (uuid, ctx) => services.vcons.getAnalysis(uuid, undefined, ctx));
  part('vcon-attachments', 'attachments', 'The attachments array of a vCon', (uuid, ctx) => services.vcons.getAttachments(uuid, {}, ctx));
  part('vcon-tags', 'tags', 'The tags of a vCon as an object of key to value', (uuid, ctx) => services.tags.get(uuid, ctx));

  const discovery = (name: string, path: string, kind: DiscoveryKind, description: string) =>
    server.registerResource(
      name,
      `${RESOURCE_PREFIX}discovery/${path}`,
      { title: description, description, mimeType: 'application/json' },
      (uri, extra) => read(uri, extra.requestId, (ctx) => services.discovery.values(kind, {}, ctx)),
    );
  discovery('attachment-purposes', 'attachments/purposes', 'attachment_purposes', 'Attachment purposes in use, with vCon counts');
  discovery('attachment-types', 'attachments/types', 'attachment_types', 'Legacy attachment types in use, with vCon counts');
  discovery('analysis-types', 'analysis/types', 'analysis_types', 'Analysis types in use, with vCon counts');

  server.registerResource(
    'tags',
    `${RESOURCE_PREFIX}tags`,
    { title: 'Tags in use', description: 'Every tag key with its values and vCon counts', mimeType: 'application/json' },
    (uri, extra) => read(uri, extra.requestId, (ctx) => services.tags.unique(ctx)),
  );
}
