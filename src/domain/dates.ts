// Dates and date-times, one set of rules for documents (created_at, dialog start) and filters
// (start_date, end_date). An instant must lie in years 0001-9999 after its offset is applied:
// what both a PostgreSQL timestamptz and JavaScript's ISO strings (which postgres.js sends) hold.

/** 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z, in ms since the epoch. */
export const MIN_INSTANT = Date.parse('0001-01-01T00:00:00.000Z');
export const MAX_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');
export const RANGE_PROBLEM = 'must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once its offset is applied';

const DATE_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:?\d{2})?$/;
const DATE_ONLY_RE = /^\d{4}-\d{2}-\d{2}$/;

export const inInstantRange = (d: Date): boolean => d.getTime() >= MIN_INSTANT && d.getTime() <= MAX_INSTANT;

// Days of each month of a non-leap year (February of a leap year checked apart).
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const digits = (s: string, from: number, to: number): number => {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
};

/**
 * The instant of a date-time in the form toISOString writes (YYYY-MM-DDTHH:MM:SS[.sss]Z), which
 * nearly every stored date has, or undefined for any other form (and impossible dates): writes
 * check ~20 dates per vCon, and the general path (regular expressions, rewriting for Date.parse)
 * was a third of validation. For this form Date.parse reads exactly what the general path reads.
 */
function canonicalInstant(s: string): number | undefined {
  const n = s.length;
  if ((n !== 20 && n !== 24) || s[4] !== '-' || s[7] !== '-' || s[10] !== 'T' || s[13] !== ':' || s[16] !== ':' || s[n - 1] !== 'Z') return undefined;
  if (n === 24 && (s[19] !== '.' || digits(s, 20, 23) < 0)) return undefined;
  const y = digits(s, 0, 4);
  const mo = digits(s, 5, 7);
  const d = digits(s, 8, 10);
  const h = digits(s, 11, 13);
  const mi = digits(s, 14, 16);
  const sec = digits(s, 17, 19);
  // Seconds of 60 and anything odd take the general path.
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59) return undefined;
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  if (d > (mo === 2 && leap ? 29 : MONTH_DAYS[mo - 1])) return undefined;
  return Date.parse(s);
}

/** Parses a date-time of DATE_TIME_RE's shape; without an offset it is read as UTC (docs/api.md). */
export function parseDateTime(s: string): Date {
  const t = canonicalInstant(s);
  if (t !== undefined) return new Date(t);
  const hasOffset = /([Zz]|[+-]\d{2}:?\d{2})$/.test(s);
  // Normalise "+hhmm" to "+hh:mm" for Date.parse.
  const iso = s.replace(' ', 'T').replace(/([+-]\d{2})(\d{2})$/, '$1:$2');
  return new Date(hasOffset ? iso : `${iso}Z`);
}

/** Why a string is not a storable RFC 3339 date-time, or undefined when it is. */
export function dateTimeProblem(s: string): 'format' | 'range' | undefined {
  const fast = canonicalInstant(s);
  if (fast !== undefined) return fast >= MIN_INSTANT && fast <= MAX_INSTANT ? undefined : 'range';
  const m = DATE_TIME_RE.exec(s);
  if (!m) return 'format';
  const [, y, mo, d, h, mi, sec] = m.map(Number);
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || (sec || 0) > 60) return 'format';
  // Days of that month (year 2000 stands in for years below 100, which Date.UTC maps to 19xx;
  // the leap rule is the same for y and y + 2000).
  if (d > new Date(Date.UTC(2000 + (y % 400), mo, 0)).getUTCDate()) return 'format';
  const t = parseDateTime(s);
  if (Number.isNaN(t.getTime())) return 'format';
  return inInstantRange(t) ? undefined : 'range';
}

/** The instant of a storable date-time, or undefined when it isn't one: isDateTime and parseDateTime in one reading. */
export function readDateTime(s: string): Date | undefined {
  const fast = canonicalInstant(s);
  if (fast !== undefined) return fast >= MIN_INSTANT && fast <= MAX_INSTANT ? new Date(fast) : undefined;
  return dateTimeProblem(s) === undefined ? parseDateTime(s) : undefined;
}

const RFC2822_RE =
  /^(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),\s*)?(\d{1,2})\s+(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+(\d{4})\s+(\d{2}):(\d{2})(?::(\d{2}))?\s+([+-]\d{4}|UT|GMT|Z)$/;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * The instant of an RFC 2822 date ("Wed, 18 May 2022 23:05:05 -0000"), which early vCon producers
 * wrote, or undefined when it is not one (or names no real, storable instant). The lenient
 * validation mode accepts it; everything downstream reads it as this instant.
 */
export function readRfc2822(s: string): Date | undefined {
  const m = RFC2822_RE.exec(s);
  if (!m) return undefined;
  const [, d, mon, y, h, mi, sec, zone] = m;
  const mo = MONTHS.indexOf(mon);
  const offset = /^[+-]/.test(zone) ? (zone[0] === '-' ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(3))) : 0;
  // setUTCFullYear, not Date.UTC, which reads years 0-99 as 1900-1999 ("01 Jan 0050" is not 1950).
  const at = new Date(0);
  at.setUTCFullYear(Number(y), mo, Number(d));
  at.setUTCHours(Number(h), Number(mi), Number(sec ?? 0), 0);
  const local = at.getTime();
  const t = new Date(local - offset * 60_000);
  // Dates roll 31 Feb over to March: a real date names its own day.
  if (at.getUTCDate() !== Number(d) || Number(h) > 23 || Number(mi) > 59 || Number(sec ?? 0) > 59) return undefined;
  return inInstantRange(t) ? t : undefined;
}

/** The instant a stored document's date names: RFC 3339, or RFC 2822 (which only the lenient mode stores). */
export const readDocumentDate = (s: string): Date | undefined => readDateTime(s) ?? readRfc2822(s);

/** True for RFC 3339 / ISO 8601 date-times with a real calendar date, in range after the offset. */
export const isDateTime = (s: string): boolean => dateTimeProblem(s) === undefined;

/**
 * A date filter bound: a full date-time, or a date alone. As a start a date means that day's
 * 00:00 UTC; as an end it covers the whole day (the bound is exclusive: the next midnight), and an
 * exact end instant is inclusive (the bound is 1 ms later). An end bound past the last storable
 * instant is no bound at all (`date` undefined): nothing stored lies beyond it.
 */
export function dateBound(value: string, edge: 'start' | 'end'): { date: Date | undefined } | { problem: string } {
  let d: Date;
  if (DATE_ONLY_RE.test(value)) {
    d = new Date(`${value}T00:00:00Z`);
    // Date.parse rolls 2025-02-30 over to March: a real date reads back as itself.
    if (Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== value)
      return { problem: `is not a real calendar date: ${JSON.stringify(value)}` };
    if (!inInstantRange(d)) return { problem: RANGE_PROBLEM };
    if (edge === 'end') d = new Date(d.getTime() + 86_400_000);
  } else {
    const problem = dateTimeProblem(value);
    if (problem === 'format') return { problem: `must be a date (YYYY-MM-DD) or an RFC 3339 date-time, got ${JSON.stringify(value.slice(0, 60))}` };
    if (problem === 'range') return { problem: RANGE_PROBLEM };
    d = parseDateTime(value);
    if (edge === 'end') d = new Date(d.getTime() + 1);
  }
  return { date: d.getTime() > MAX_INSTANT ? undefined : d };
}
