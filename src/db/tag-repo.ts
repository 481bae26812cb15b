import type { Db } from './client.js';

/** Reads of the derived tag table: unique tags and tag search, never a document scan. */
export function createTagRepo(db: Db) {
  return {
    async unique() {
      const [{ n }] = await db<{ n: number }[]>`select count(distinct vcon_uuid)::int as n from vcon_tags`;
      const rows = await db<{ key: string; value: string; count: number }[]>`
        select key, value, count(*)::int as count from vcon_tags group by key, value order by key, count desc, value`;
      const keys = new Map<string, { key: string; vcon_count: number; values: { value: string; count: number }[] }>();
      for (const r of rows) {
        const k = keys.get(r.key) ?? { key: r.key, vcon_count: 0, values: [] };
        k.vcon_count += r.count; // one row per (vcon, key): value counts add up to the key's vCons
        k.values.push({ value: r.value, count: r.count });
        keys.set(r.key, k);
      }
      return { total_vcons_with_tags: n, keys: [...keys.values()].sort((a, b) => b.vcon_count - a.vcon_count || (a.key < b.key ? -1 : 1)) };
    },

    async search(tags: Record<string, string>, limit: number, offset: number): Promise<string[]> {
      const pairs = Object.entries(tags);
      const conds = pairs.map(([k, v]) => db`and exists (select 1 from vcon_tags t where t.vcon_uuid = v.uuid and t.key = ${k} and t.value = ${v})`);
      const rows = await db<{ uuid: string }[]>`
        select v.uuid::text from vcons v
        where v.tags_updated_at is not null ${conds.reduce((a, c) => db`${a} ${c}`, db``)}
        order by v.tags_updated_at desc, v.uuid desc
        limit ${limit} offset ${offset}`;
      return rows.map((r) => r.uuid);
    },
  };
}
