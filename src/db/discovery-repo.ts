import type { Db } from './client.js';

export type DiscoveryKind = 'attachment_purposes' | 'attachment_types' | 'analysis_types';

/** Live classification values with the number of vCons having each, from the derived tables. */
export function createDiscoveryRepo(db: Db) {
  return {
    async values(kind: DiscoveryKind, minCount: number): Promise<{ total_vcons: number; values: { value: string; count: number }[] }> {
      const source =
        kind === 'analysis_types'
          ? db`select type as value, vcon_uuid from vcon_analyses where type is not null`
          : kind === 'attachment_purposes'
            ? db`select purpose as value, vcon_uuid from vcon_attachments where purpose is not null`
            : db`select type as value, vcon_uuid from vcon_attachments where type is not null`;
      const values = await db<{ value: string; count: number }[]>`
        select value, count(distinct vcon_uuid)::int as count from (${source}) s
        group by value having count(distinct vcon_uuid) >= ${minCount}
        order by count desc, value`;
      const [{ n }] = await db<{ n: number }[]>`select count(*)::int as n from vcons`;
      return { total_vcons: n, values };
    },
  };
}
