import { boolParam, intParam } from '../domain/queries.js';
import type { RequestCtx } from './context.js';
import { runHook, type Plugin } from '../plugins/hooks.js';

export type DiscoveryKind = 'attachment_purposes' | 'attachment_types' | 'analysis_types';

export interface DiscoveryRepo {
  values(kind: DiscoveryKind, minCount: number): Promise<{ total_vcons: number; values: { value: string; count: number }[] }>;
}

/** Discovery-first reads (SPEC.md): the live purposes, legacy types and analysis types. */
export function createDiscoveryService(deps: { repo: DiscoveryRepo; plugins: readonly Plugin[] }) {
  return {
    async values(kind: DiscoveryKind, raw: { include_counts?: unknown; min_count?: unknown }, ctx: RequestCtx) {
      const includeCounts = boolParam('include_counts', raw.include_counts, true);
      const minCount = intParam('min_count', raw.min_count, { def: 1, min: 1 });
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
