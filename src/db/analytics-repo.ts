// Analytics over the derived tables (docs/architecture.md "Storage model"): exact counts of this
// schema's data, never a document scan. Dates, granularities and limits arrive validated and are
// bound parameters; nothing from a request is pasted into SQL text.
import type { Db } from './client.js';

export type Granularity = 'day' | 'week' | 'month';

export interface DateRange {
  /** Inclusive lower bound on vcons.created_at. */
  start?: Date;
  /** Exclusive upper bound on vcons.created_at. */
  end?: Date;
}

export interface GrowthRow {
  period: string;
  vcons: number;
  parties: number;
  dialogs: number;
  analyses: number;
  attachments: number;
}

export interface Breakdown {
  value: string | null;
  count: number;
  vcons: number;
  bytes: number;
}

export function createAnalyticsRepo(db: Db) {
  // One row per dialog from the per-vCon arrays of vcon_dialogs (migration 0005), with its vCon.
  const dialogRows = () => db`
    vcon_dialogs d join vcons v on v.uuid = d.vcon_uuid
    cross join lateral unnest(d.types, d.durations, d.mediatypes, d.encodings, d.body_bytes)
      as x(type, duration, mediatype, encoding, body_bytes)`;
  const inRange = (r: DateRange) => db`${r.start ? db`and v.created_at >= ${r.start}` : db``} ${r.end ? db`and v.created_at < ${r.end}` : db``}`;

  return {
    /** Totals of the whole schema. */
    async summary() {
      const [r] = await db<
        {
          vcons: number;
          parties: number;
          dialogs: number;
          analyses: number;
          attachments: number;
          first_created_at: Date | null;
          last_created_at: Date | null;
          stored_24h: number;
          stored_7d: number;
          stored_30d: number;
        }[]
      >`
        select count(*)::float8 as vcons,
               coalesce(sum(parties_count), 0)::float8 as parties,
               coalesce(sum(dialog_count), 0)::float8 as dialogs,
               coalesce(sum(analysis_count), 0)::float8 as analyses,
               coalesce(sum(attachments_count), 0)::float8 as attachments,
               min(created_at) as first_created_at, max(created_at) as last_created_at,
               count(*) filter (where stored_at >= now() - interval '1 day')::float8 as stored_24h,
               count(*) filter (where stored_at >= now() - interval '7 days')::float8 as stored_7d,
               count(*) filter (where stored_at >= now() - interval '30 days')::float8 as stored_30d
        from vcons`;
      const [t] = await db<{ tags: number; tagged_vcons: number }[]>`
        select count(*)::float8 as tags, count(distinct vcon_uuid)::float8 as tagged_vcons from vcon_tags`;
      return { ...r, ...t };
    },

    /**
     * vCons created per period (UTC) from the start of the period `monthsBack` months ago to the
     * current period, with their parties, dialogs, analyses and attachments; empty periods included.
     */
    async growth(granularity: Granularity, monthsBack: number) {
      const step = `1 ${granularity}`;
      const rows = await db<(GrowthRow & { current: boolean })[]>`
        with bounds as (
          select date_trunc(${granularity}, (now() at time zone 'UTC') - make_interval(months => ${monthsBack})) as since,
                 date_trunc(${granularity}, now() at time zone 'UTC') as last
        ), periods as (
          select generate_series(b.since, b.last, ${step}::interval) as period, b.last from bounds b
        ), agg as (
          select date_trunc(${granularity}, v.created_at at time zone 'UTC') as period,
                 count(*)::float8 as vcons, sum(v.parties_count)::float8 as parties, sum(v.dialog_count)::float8 as dialogs,
                 sum(v.analysis_count)::float8 as analyses, sum(v.attachments_count)::float8 as attachments
          from vcons v, bounds b
          where v.created_at >= (b.since at time zone 'UTC')
          group by 1
        )
        select to_char(p.period, 'YYYY-MM-DD') as period, p.period = p.last as current,
               coalesce(a.vcons, 0)::float8 as vcons, coalesce(a.parties, 0)::float8 as parties,
               coalesce(a.dialogs, 0)::float8 as dialogs, coalesce(a.analyses, 0)::float8 as analyses,
               coalesce(a.attachments, 0)::float8 as attachments
        from periods p left join agg a on a.period = p.period
        order by p.period`;
      const [before] = await db<{ n: number; since: string; future: number }[]>`
        with bounds as (
          select date_trunc(${granularity}, (now() at time zone 'UTC') - make_interval(months => ${monthsBack})) as since,
                 date_trunc(${granularity}, now() at time zone 'UTC') + ${step}::interval as next
        )
        select (select count(*) from vcons v where v.created_at < (b.since at time zone 'UTC'))::float8 as n,
               (select count(*) from vcons v where v.created_at >= (b.next at time zone 'UTC'))::float8 as future,
               to_char(b.since, 'YYYY-MM-DD') as since
        from bounds b`;
      return { rows, before_window: before.n, after_window: before.future, since: before.since };
    },

    async conversations(r: DateRange) {
      const [c] = await db<
        {
          vcons: number;
          with_dialog: number;
          with_analysis: number;
          with_attachments: number;
          parties: number;
          dialogs: number;
          analyses: number;
          attachments: number;
          avg_parties: number | null;
          min_parties: number | null;
          max_parties: number | null;
          avg_dialogs: number | null;
          avg_analyses: number | null;
          avg_attachments: number | null;
          first_created_at: Date | null;
          last_created_at: Date | null;
        }[]
      >`
        select count(*)::float8 as vcons,
               count(*) filter (where dialog_count > 0)::float8 as with_dialog,
               count(*) filter (where analysis_count > 0)::float8 as with_analysis,
               count(*) filter (where attachments_count > 0)::float8 as with_attachments,
               coalesce(sum(parties_count), 0)::float8 as parties, coalesce(sum(dialog_count), 0)::float8 as dialogs,
               coalesce(sum(analysis_count), 0)::float8 as analyses, coalesce(sum(attachments_count), 0)::float8 as attachments,
               avg(parties_count)::float8 as avg_parties, min(parties_count) as min_parties, max(parties_count) as max_parties,
               avg(dialog_count)::float8 as avg_dialogs, avg(analysis_count)::float8 as avg_analyses,
               avg(attachments_count)::float8 as avg_attachments,
               min(created_at) as first_created_at, max(created_at) as last_created_at
        from vcons v where true ${inRange(r)}`;
      const kinds = await db<{ kind: string; count: number }[]>`
        select kind, count(*)::float8 as count from vcons v where true ${inRange(r)} group by kind order by count desc, kind`;
      const partiesPerVcon = await db<{ parties: number; vcons: number }[]>`
        select parties_count as parties, count(*)::float8 as vcons from vcons v where true ${inRange(r)}
        group by 1 order by 1`;
      return { ...c, kinds, parties_per_vcon: partiesPerVcon };
    },

    async dialogs(r: DateRange) {
      const byType = await db<
        {
          type: string | null;
          count: number;
          vcons: number;
          with_duration: number;
          total_duration_s: number | null;
          avg_duration_s: number | null;
          min_duration_s: number | null;
          max_duration_s: number | null;
          bytes: number;
        }[]
      >`
        select x.type, count(*)::float8 as count, count(distinct d.vcon_uuid)::float8 as vcons,
               count(x.duration)::float8 as with_duration, sum(x.duration)::float8 as total_duration_s,
               avg(x.duration)::float8 as avg_duration_s, min(x.duration)::float8 as min_duration_s,
               max(x.duration)::float8 as max_duration_s, coalesce(sum(x.body_bytes), 0)::float8 as bytes
        from ${dialogRows()}
        where true ${inRange(r)}
        group by x.type order by count desc, x.type nulls last`;
      const [durations] = await db<
        {
          count: number;
          total_s: number | null;
          avg_s: number | null;
          min_s: number | null;
          max_s: number | null;
          p50_s: number | null;
          p90_s: number | null;
        }[]
      >`
        select count(x.duration)::float8 as count, sum(x.duration)::float8 as total_s, avg(x.duration)::float8 as avg_s,
               min(x.duration)::float8 as min_s, max(x.duration)::float8 as max_s,
               percentile_cont(0.5) within group (order by x.duration)::float8 as p50_s,
               percentile_cont(0.9) within group (order by x.duration)::float8 as p90_s
        from ${dialogRows()}
        where x.duration is not null ${inRange(r)}`;
      const mediatypes = await db<{ value: string | null; count: number }[]>`
        select x.mediatype as value, count(*)::float8 as count
        from ${dialogRows()} where true ${inRange(r)}
        group by 1 order by count desc, 1 nulls last limit 50`;
      const encodings = await db<{ value: string | null; count: number }[]>`
        select x.encoding as value, count(*)::float8 as count
        from ${dialogRows()} where true ${inRange(r)}
        group by 1 order by count desc, 1 nulls last`;
      return { by_type: byType, durations, mediatypes, encodings };
    },

    async analyses(r: DateRange) {
      const byType = await db<{ type: string | null; count: number; vcons: number; bytes: number }[]>`
        select a.type, count(*)::float8 as count, count(distinct a.vcon_uuid)::float8 as vcons,
               coalesce(sum(a.body_bytes), 0)::float8 as bytes
        from vcon_analyses a join vcons v on v.uuid = a.vcon_uuid where true ${inRange(r)}
        group by a.type order by count desc, a.type nulls last`;
      const byVendor = await db<{ vendor: string | null; count: number; vcons: number; products: string[] }[]>`
        select a.vendor, count(*)::float8 as count, count(distinct a.vcon_uuid)::float8 as vcons,
               array_remove(array_agg(distinct a.product), null) as products
        from vcon_analyses a join vcons v on v.uuid = a.vcon_uuid where true ${inRange(r)}
        group by a.vendor order by count desc, a.vendor nulls last`;
      const byTypeVendor = await db<{ type: string | null; vendor: string | null; count: number }[]>`
        select a.type, a.vendor, count(*)::float8 as count
        from vcon_analyses a join vcons v on v.uuid = a.vcon_uuid where true ${inRange(r)}
        group by a.type, a.vendor order by count desc, a.type nulls last, a.vendor nulls last`;
      const encodings = await db<{ value: string | null; count: number }[]>`
        select a.encoding as value, count(*)::float8 as count
        from vcon_analyses a join vcons v on v.uuid = a.vcon_uuid where true ${inRange(r)}
        group by 1 order by count desc, 1 nulls last`;
      return { by_type: byType, by_vendor: byVendor, by_type_and_vendor: byTypeVendor, encodings };
    },

    async parties(r: DateRange) {
      const [p] = await db<
        {
          total: number;
          with_name: number;
          with_tel: number;
          with_mailto: number;
          with_uuid: number;
          distinct_tel: number;
          distinct_mailto: number;
          distinct_name: number;
        }[]
      >`
        select count(*)::float8 as total,
               count(p.name)::float8 as with_name, count(p.tel)::float8 as with_tel,
               count(p.mailto)::float8 as with_mailto, count(p.party_uuid)::float8 as with_uuid,
               count(distinct p.tel)::float8 as distinct_tel, count(distinct lower(p.mailto))::float8 as distinct_mailto,
               count(distinct p.name)::float8 as distinct_name
        from vcon_parties p join vcons v on v.uuid = p.vcon_uuid where true ${inRange(r)}`;
      return p;
    },

    async tags(keysLimit: number, valuesLimit: number) {
      const [totals] = await db<{ vcons: number; tagged_vcons: number; tags: number; keys: number; pairs: number }[]>`
        select (select count(*) from vcons)::float8 as vcons,
               count(distinct vcon_uuid)::float8 as tagged_vcons, count(*)::float8 as tags,
               count(distinct key)::float8 as keys, count(distinct (key, value))::float8 as pairs
        from vcon_tags`;
      const keys = await db<{ key: string; vcons: number; distinct_values: number }[]>`
        select key, count(*)::float8 as vcons, count(distinct value)::float8 as distinct_values
        from vcon_tags group by key order by vcons desc, key limit ${keysLimit}`;
      const values = await db<{ key: string; value: string; count: number }[]>`
        with top as (
          select key from vcon_tags group by key order by count(*) desc, key limit ${keysLimit}
        )
        select key, value, count from (
          select t.key, t.value, count(*)::float8 as count,
                 row_number() over (partition by t.key order by count(*) desc, t.value) as rn
          from vcon_tags t where t.key in (select key from top)
          group by t.key, t.value
        ) s where rn <= ${valuesLimit}
        order by key, count desc, value`;
      const pairs = await db<{ key: string; value: string; count: number }[]>`
        select key, value, count(*)::float8 as count from vcon_tags
        group by key, value order by count desc, key, value limit ${keysLimit}`;
      return { totals, keys, values, top_pairs: pairs };
    },

    async attachments() {
      const [totals] = await db<
        {
          total: number;
          vcons: number;
          all_vcons: number;
          with_body: number;
          bytes: number;
          avg_bytes: number | null;
          max_bytes: number | null;
          p50_bytes: number | null;
          p90_bytes: number | null;
          tags_attachments: number;
          without_purpose_or_type: number;
        }[]
      >`
        select count(*)::float8 as total, count(distinct vcon_uuid)::float8 as vcons,
               (select count(*) from vcons)::float8 as all_vcons,
               count(body_bytes)::float8 as with_body, coalesce(sum(body_bytes), 0)::float8 as bytes,
               avg(body_bytes)::float8 as avg_bytes, max(body_bytes)::float8 as max_bytes,
               percentile_cont(0.5) within group (order by body_bytes)::float8 as p50_bytes,
               percentile_cont(0.9) within group (order by body_bytes)::float8 as p90_bytes,
               count(*) filter (where purpose = 'tags' or type = 'tags')::float8 as tags_attachments,
               count(*) filter (where purpose is null and type is null)::float8 as without_purpose_or_type
        from vcon_attachments`;
      const breakdown = (col: 'purpose' | 'type' | 'encoding' | 'mediatype') => db<Breakdown[]>`
        select ${db(col)} as value, count(*)::float8 as count, count(distinct vcon_uuid)::float8 as vcons,
               coalesce(sum(body_bytes), 0)::float8 as bytes
        from vcon_attachments
        ${col === 'purpose' || col === 'type' ? db`where ${db(col)} is not null` : db``}
        group by 1 order by count desc, 1 nulls last limit 100`;
      return {
        totals,
        purposes: await breakdown('purpose'),
        types: await breakdown('type'),
        encodings: await breakdown('encoding'),
        mediatypes: await breakdown('mediatype'),
      };
    },
  };
}

export type AnalyticsRepo = ReturnType<typeof createAnalyticsRepo>;
