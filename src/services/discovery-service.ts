import { DiscoveryQuery, parseParams } from '../domain/params.js';
import type { RequestCtx } from './context.js';
import { runHook, type Plugin } from '../plugins/hooks.js';

export type DiscoveryKind = 'attachment_purposes' | 'attachment_types' | 'analysis_types';

export interface DiscoveryRepo {
  values(kind: DiscoveryKind, minCount: number): Promise<{ total_vcons: number; values: { value: string; count: number }[] }>;
}

/** Discovery-first reads: the live purposes, legacy types and analysis types. */
export function createDiscoveryService(deps: { repo: DiscoveryRepo; plugins: readonly Plugin[] }) {
  return {
    async values(kind: DiscoveryKind, raw: unknown, ctx: RequestCtx) {
      const { include_counts: includeCounts, min_count: minCount } = parseParams(DiscoveryQuery, raw);
      await runHook(deps.plugins, 'beforeSearch', { kind: 'list', query: { discovery: kind, min_count: minCount } }, ctx);
      const r = await deps.repo.values(kind, minCount);
      return {
        total_vcons: r.total_vcons,
        count: r.values.length,
        values: includeCounts ? r.values : r.values.map(({ value }) => ({ value })),
      };
    },
  };
}

export type DiscoveryService = ReturnType<typeof createDiscoveryService>;
