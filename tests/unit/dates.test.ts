// Date-times are read on every write (~20 per vCon): the fast reading of the toISOString form must
// answer exactly what the general rules answer, for valid and invalid dates alike.
import { describe, expect, it } from 'vitest';
import { dateTimeProblem, MAX_INSTANT, MIN_INSTANT, parseDateTime, readDateTime } from '../../src/domain/dates.js';
import { validate, Vcon } from '../../src/domain/vcon.js';
import { ValidationError } from '../../src/domain/errors.js';

// The general rules as they were before the fast path, kept here as the oracle.
const DATE_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:?\d{2})?$/;
function oracleParse(s: string): Date {
  const hasOffset = /([Zz]|[+-]\d{2}:?\d{2})$/.test(s);
  const iso = s.replace(' ', 'T').replace(/([+-]\d{2})(\d{2})$/, '$1:$2');
  return new Date(hasOffset ? iso : `${iso}Z`);
}
function oracleProblem(s: string): 'format' | 'range' | undefined {
  const m = DATE_TIME_RE.exec(s);
  if (!m) return 'format';
  const [, y, mo, d, h, mi, sec] = m.map(Number);
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || (sec || 0) > 60) return 'format';
  if (d > new Date(Date.UTC(2000 + (y % 400), mo, 0)).getUTCDate()) return 'format';
  const t = oracleParse(s).getTime();
  if (Number.isNaN(t)) return 'format';
  return t >= MIN_INSTANT && t <= MAX_INSTANT ? undefined : 'range';
}

const pad = (n: number, w: number) => String(n).padStart(w, '0');

describe('date-times', () => {
  it('the toISOString form reads as the general rules read it, valid or not', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const years = [0, 1, 4, 99, 100, 400, 1900, 2000, 2023, 2024, 2100, 9999];
    const cases: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const y = rnd(3) === 0 ? rnd(10_000) : years[rnd(years.length)];
      const base = `${pad(y, 4)}-${pad(rnd(14), 2)}-${pad(rnd(33), 2)}T${pad(rnd(26), 2)}:${pad(rnd(62), 2)}:${pad(rnd(62), 2)}`;
      cases.push(`${base}Z`, `${base}.${pad(rnd(1000), 3)}Z`);
    }
    cases.push(
      '2024-02-29T00:00:00Z',
      '2023-02-29T00:00:00Z',
      '2000-02-29T12:00:00.000Z',
      '1900-02-29T12:00:00.000Z',
      '0000-01-01T00:00:00Z',
      '0001-01-01T00:00:00.000Z',
      '9999-12-31T23:59:59.999Z',
      '2024-12-31T23:59:60Z',
      '2024-01-01T00:00:00.12Z',
      '2024-01-01T00:00:00.1234Z',
      '2024-01-01t00:00:00Z',
      '2024-01-01T00:00:00z',
      '2024-01-01 00:00:00Z',
      '2024-01-01T00:00:00+01:00',
      '2024-01-01T00:00:00',
      '2024-1-01T00:00:00Z',
      '2024-01-01T00:00:0aZ',
      '+02024-01-01T00:00:00Z',
      '2024-01-01T00:00:00.abcZ',
    );
    const wrong = cases.filter((s) => dateTimeProblem(s) !== oracleProblem(s));
    expect(wrong).toEqual([]);
    const valid = cases.filter((s) => oracleProblem(s) === undefined);
    expect(valid.length).toBeGreaterThan(1000);
    expect(valid.filter((s) => parseDateTime(s).getTime() !== oracleParse(s).getTime())).toEqual([]);
    expect(cases.filter((s) => readDateTime(s)?.getTime() !== (oracleProblem(s) === undefined ? oracleParse(s).getTime() : undefined))).toEqual([]);
  });

  it('a vCon date is refused with one problem naming format or range', () => {
    const problems = (doc: unknown) => {
      try {
        validate(Vcon, doc, 'vCon');
        return [];
      } catch (err) {
        return (err as ValidationError).details;
      }
    };
    expect(problems({ created_at: '2023-02-29T00:00:00Z' })).toEqual([
      { path: 'created_at', message: 'must be an RFC 3339 date-time such as 2025-01-31T14:05:00Z' },
    ]);
    expect(problems({ dialog: [{ type: 'text', start: '0000-06-01T00:00:00Z' }] })).toEqual([
      { path: 'dialog[0].start', message: 'must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once its offset is applied' },
    ]);
    expect(problems({ created_at: '2024-02-29T10:00:00.000Z', dialog: [{ type: 'text', start: '2024-02-29T10:00:00+0100' }] })).toEqual([]);
  });
});
