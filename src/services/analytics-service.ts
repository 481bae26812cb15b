// Analytics of this instance's vCons (docs/api.md "Database and analytics"): growth, content, tags and
// attachments, computed from the derived tables. Every parameter is validated here, for REST
// (strings) and MCP (typed values) alike; the figures are exact counts, the projection an estimate.
import { AnalyticsQuery, DateRangeQuery, GrowthQuery, parseParams, TagAnalyticsQuery } from '../domain/params.js';
import { runHook, type Plugin } from '../plugins/hooks.js';
import type { RequestCtx } from './context.js';
import type { AnalyticsRepo, DateRange, Granularity, GrowthRow } from '../db/analytics-repo.js';

/** Periods projected after the last complete one (the current period included). */
const PROJECTION_PERIODS = 3;

/** Raw parameters: strings from REST, typed values from MCP (parsed with domain/params.ts). */
type Raw = unknown;

/** Validated growth parameters. */
export interface GrowthParams {
  granularity: Granularity;
  months_back: number;
}

const round = (n: number | null | undefined, digits = 3): number | null =>
  n === null || n === undefined || !Number.isFinite(n) ? null : Math.round(n * 10 ** digits) / 10 ** digits;
const ratio = (part: number, whole: number) => (whole > 0 ? round(part / whole, 4) : null);

const rangeOf = (q: { start_date?: Date; end_date?: Date }): DateRange => ({ start: q.start_date, end: q.end_date });

/** The start of the period after `period` (YYYY-MM-DD, UTC). */
function nextPeriod(period: string, g: Granularity): string {
  const d = new Date(`${period}T00:00:00Z`);
  if (g === 'day') d.setUTCDate(d.getUTCDate() + 1);
  else if (g === 'week') d.setUTCDate(d.getUTCDate() + 7);
  else d.setUTCMonth(d.getUTCMonth() + 1);
  return d.toISOString().slice(0, 10);
}

/** Least-squares line over the complete periods, extended over the next periods. */
function project(rows: (GrowthRow & { current: boolean })[], g: Granularity) {
  const complete = rows.filter((r) => !r.current);
  const method = 'least-squares line through the vCons of each complete period in the window, extended forward';
  if (complete.length < 2) {
    return {
      estimate: true,
      method,
      based_on_periods: complete.length,
      average_per_period: null,
      slope_per_period: null,
      trend: null,
      next: [],
      reason: 'needs at least two complete periods',
    };
  }
  const n = complete.length;
  const ys = complete.map((r) => r.vcons);
  const meanX = (n - 1) / 2;
  const meanY = ys.reduce((s, y) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  ys.forEach((y, x) => {
    num += (x - meanX) * (y - meanY);
    den += (x - meanX) ** 2;
  });
  const slope = num / den;
  const intercept = meanY - slope * meanX;
  const next: { period: string; vcons: number }[] = [];
  let period = complete[n - 1].period;
  for (let k = 0; k < PROJECTION_PERIODS; k++) {
    period = nextPeriod(period, g);
    next.push({ period, vcons: Math.max(0, round(intercept + slope * (n + k), 1) ?? 0) });
  }
  const flat = Math.abs(slope) < Math.max(meanY * 0.01, 1e-9);
  return {
    estimate: true,
    method,
    based_on_periods: n,
    average_per_period: round(meanY, 2),
    slope_per_period: round(slope, 3),
    trend: flat ? 'flat' : slope > 0 ? 'growing' : 'shrinking',
    next,
  };
}

/** Analytics of this schema's vCons; reads pass the beforeSearch hook (a plugin may veto). */
export function createAnalyticsService(deps: { repo: AnalyticsRepo; plugins: readonly Plugin[] }) {
  const { repo, plugins } = deps;
  const gate = (section: string, query: Record<string, unknown>, ctx: RequestCtx) =>
    runHook(plugins, 'beforeSearch', { kind: 'list', query: { analytics: section, ...query } }, ctx);

  async function growthOf(p: GrowthParams) {
    const { rows, before_window, after_window, since } = await repo.growth(p.granularity, p.months_back);
    let cumulative = before_window;
    const periods = rows.map(({ current, ...r }) => {
      cumulative += r.vcons;
      return { ...r, cumulative_vcons: cumulative, partial: current };
    });
    const sum = (k: 'vcons' | 'parties' | 'dialogs' | 'analyses' | 'attachments') => rows.reduce((s, r) => s + r[k], 0);
    return {
      granularity: p.granularity,
      months_back: p.months_back,
      date_field: 'created_at',
      since,
      periods,
      totals: { vcons: sum('vcons'), parties: sum('parties'), dialogs: sum('dialogs'), analyses: sum('analyses'), attachments: sum('attachments') },
      before_window,
      after_window,
      projection: project(rows, p.granularity),
    };
  }

  async function contentOf(r: DateRange) {
    const [conv, dialogs, analyses, parties] = await Promise.all([repo.conversations(r), repo.dialogs(r), repo.analyses(r), repo.parties(r)]);
    return {
      range: { start_date: r.start?.toISOString() ?? null, end_date_exclusive: r.end?.toISOString() ?? null, date_field: 'created_at' },
      conversations: {
        vcons: conv.vcons,
        kinds: conv.kinds,
        with_dialog: conv.with_dialog,
        with_analysis: conv.with_analysis,
        with_attachments: conv.with_attachments,
        first_created_at: conv.first_created_at,
        last_created_at: conv.last_created_at,
        dialogs_per_vcon: round(conv.avg_dialogs),
        analyses_per_vcon: round(conv.avg_analyses),
        attachments_per_vcon: round(conv.avg_attachments),
      },
      dialogs: {
        total: conv.dialogs,
        by_type: dialogs.by_type.map((d) => ({
          ...d,
          avg_duration_s: round(d.avg_duration_s),
          total_duration_s: round(d.total_duration_s),
        })),
        durations: {
          count: dialogs.durations.count,
          total_s: round(dialogs.durations.total_s),
          avg_s: round(dialogs.durations.avg_s),
          min_s: dialogs.durations.min_s,
          max_s: dialogs.durations.max_s,
          p50_s: round(dialogs.durations.p50_s),
          p90_s: round(dialogs.durations.p90_s),
        },
        mediatypes: dialogs.mediatypes,
        encodings: dialogs.encodings,
      },
      analyses: { total: conv.analyses, ...analyses },
      parties: {
        total: conv.parties,
        per_vcon: {
          avg: round(conv.avg_parties),
          min: conv.min_parties,
          max: conv.max_parties,
          distribution: conv.parties_per_vcon,
        },
        with_name: parties.with_name,
        with_tel: parties.with_tel,
        with_mailto: parties.with_mailto,
        with_uuid: parties.with_uuid,
        distinct_tel: parties.distinct_tel,
        distinct_mailto: parties.distinct_mailto,
        distinct_name: parties.distinct_name,
      },
    };
  }

  async function tagsOf(p: { limit: number; values_limit: number }) {
    const t = await repo.tags(p.limit, p.values_limit);
    return {
      total_vcons: t.totals.vcons,
      tagged_vcons: t.totals.tagged_vcons,
      coverage: ratio(t.totals.tagged_vcons, t.totals.vcons),
      tags: t.totals.tags,
      distinct_keys: t.totals.keys,
      distinct_pairs: t.totals.pairs,
      keys: t.keys.map((k) => ({
        key: k.key,
        vcons: k.vcons,
        coverage: ratio(k.vcons, t.totals.vcons),
        distinct_values: k.distinct_values,
        top_values: t.values.filter((v) => v.key === k.key).map(({ value, count }) => ({ value, count })),
      })),
      top_pairs: t.top_pairs,
    };
  }

  async function attachmentsOf() {
    const a = await repo.attachments();
    const t = a.totals;
    return {
      total: t.total,
      vcons_with_attachments: t.vcons,
      coverage: ratio(t.vcons, t.all_vcons),
      tags_attachments: t.tags_attachments,
      without_purpose_or_type: t.without_purpose_or_type,
      sizes: {
        with_body: t.with_body,
        bytes: t.bytes,
        avg_bytes: round(t.avg_bytes, 1),
        p50_bytes: round(t.p50_bytes, 1),
        p90_bytes: round(t.p90_bytes, 1),
        max_bytes: t.max_bytes,
      },
      purposes: a.purposes.map(({ value, ...r }) => ({ purpose: value, ...r })),
      types: a.types.map(({ value, ...r }) => ({ type: value, ...r })),
      encodings: a.encodings.map(({ value, ...r }) => ({ encoding: value, ...r })),
      mediatypes: a.mediatypes.map(({ value, ...r }) => ({ mediatype: value, ...r })),
    };
  }

  const NOTE = "Exact counts over this schema's derived tables; the growth projection is an estimate.";

  return {
    /** Everything below in one answer, plus schema-wide totals. */
    async all(raw: Raw, ctx: RequestCtx) {
      const { granularity, months_back, limit, values_limit, ...dates } = parseParams(AnalyticsQuery, raw);
      const growth = { granularity, months_back };
      const range = rangeOf(dates);
      const tags = { limit, values_limit };
      await gate('all', { ...growth, ...range, ...tags }, ctx);
      const [summary, g, c, t, a] = await Promise.all([repo.summary(), growthOf(growth), contentOf(range), tagsOf(tags), attachmentsOf()]);
      return { note: NOTE, summary, growth: g, content: c, tags: t, attachments: a };
    },

    /** vCons, parties, dialogs, analyses and attachments per day/week/month, with a projection. */
    async growth(raw: Raw, ctx: RequestCtx) {
      const p = parseParams(GrowthQuery, raw);
      await gate('growth', { ...p }, ctx);
      return { note: NOTE, ...(await growthOf(p)) };
    },

    /** Dialog types and durations, analysis types and vendors, parties, conversation metrics. */
    async content(raw: Raw, ctx: RequestCtx) {
      const r = rangeOf(parseParams(DateRangeQuery, raw));
      await gate('content', { ...r }, ctx);
      return { note: NOTE, ...(await contentOf(r)) };
    },

    /** Top tag keys and values, and how many vCons carry tags. */
    async tags(raw: Raw, ctx: RequestCtx) {
      const p = parseParams(TagAnalyticsQuery, raw);
      await gate('tags', { ...p }, ctx);
      return { note: NOTE, ...(await tagsOf(p)) };
    },

    /** Attachment purposes, legacy types, encodings, media types and sizes. */
    async attachments(_raw: Raw, ctx: RequestCtx) {
      await gate('attachments', {}, ctx);
      return { note: NOTE, ...(await attachmentsOf()) };
    },
  };
}

/** The analytics use cases both transports call (REST /analytics/*, MCP tools). */
export type AnalyticsService = ReturnType<typeof createAnalyticsService>;
