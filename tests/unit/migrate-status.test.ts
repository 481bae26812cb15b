// `vcon-launch migrate --status` for people: one line per group, never wider than 100 columns.
import { describe, expect, it } from 'vitest';
import { formatMigrateStatus, STATUS_WIDTH, type MigrateResult } from '../../cli/commands/migrate.js';

const names = ['0001_schema', '0002_party_identifier_indexes', '0003_change_log', '0004_webhooks'];
const migration = (name: string) => ({ version: Number(name.slice(0, 4)), name });
const result = (group: string, applied: number, extra: Partial<MigrateResult> = {}): MigrateResult => ({
  group,
  schema: `${group}_schema_with_a_long_name`,
  database: 'vcon_user_with_a_long_name@db.internal.example.com:5432/vcon_production',
  applied: [],
  status: {
    schema: group,
    applied: names.slice(0, applied).map((n) => ({ ...migration(n), applied_at: '2026-01-01T00:00:00.000Z' })),
    pending: names.slice(applied).map(migration),
  },
  ...extra,
});

describe('migrate --status lines', () => {
  it('says per group whether it is up to date or what is pending', () => {
    const out = formatMigrateStatus([result('acme', 4), result('globex', 2), result('initech', 0)]);
    expect(out.split('\n')).toEqual([
      'acme     up to date (4 migrations)',
      'globex   2 pending: 0003_change_log, 0004_webhooks',
      'initech  4 pending: 0001_schema, 0002_party_identifier_indexes, 0003_change_log, 0004_webhooks',
    ]);
  });

  it('keeps every line within the width: long lists are cut, errors and long names wrapped', () => {
    const many = Array.from({ length: 30 }, (_, i) => ({ version: i + 1, name: `${String(i + 1).padStart(4, '0')}_a_longer_name` }));
    const error = `schema acme has no role of this launcher yet; ${'a long explanation of what went wrong '.repeat(6)}`;
    const out = formatMigrateStatus([
      result('acme', 0, { status: { schema: 'acme', applied: [], pending: many } }),
      result('broken', 0, { status: undefined, error }),
      result('g'.repeat(60), 4),
    ]);
    const lines = out.split('\n');
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(STATUS_WIDTH);
    expect(lines[0]).toMatch(/^acme +30 pending: 0001_a_longer_name, .*, and \d+ more \(see --json\)$/);
    // The whole error is there, over several lines.
    expect(
      lines
        .filter((l) => !l.startsWith('acme') && !l.includes('g'.repeat(60)) && !l.includes('up to date'))
        .join(' ')
        .replace(/\s+/g, ' '),
    ).toContain(error.trim().replace(/\s+/g, ' '));
    expect(lines).toContain('g'.repeat(60));
  });
});
