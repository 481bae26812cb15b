// Order statistics and the figure model shared by every part of the bench.

/** Nearest-rank percentile (p in 0..100) of unsorted values; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export const median = (values: readonly number[]) => percentile(values, 50);

/** Higher is better (throughput) or lower is better (latency, time, memory). */
export type Direction = 'higher' | 'lower';

/**
 * A goal: `ratio` compares the figure with its floor (value/floor for throughput, floor/value for
 * latency, time and memory, so 1 means "as good as the floor" either way); `max` and `min` are
 * absolute bounds on the median over rounds; `none` only reports.
 */
export type Goal = { kind: 'ratio'; min: number } | { kind: 'max'; value: number } | { kind: 'min'; value: number } | { kind: 'none' };

export interface Series {
  rounds: number[];
  median: number;
  /** The 95th percentile of the rounds in the bad direction (p5 for throughput, p95 otherwise). */
  p95: number;
}

export interface Figure {
  id: string;
  label: string;
  unit: string;
  better: Direction;
  value: Series;
  floor?: Series & { label: string };
  /** Floor-relative efficiency of the medians (see Goal). */
  ratio?: number;
  goal: Goal;
  pass?: boolean;
  note?: string;
}

export function toSeries(rounds: number[], better: Direction): Series {
  return { rounds, median: median(rounds), p95: percentile(rounds, better === 'higher' ? 5 : 95) };
}

/** Builds a figure: series, ratio against the floor and the verdict of the goal. */
export function makeFigure(f: {
  id: string;
  label: string;
  unit: string;
  better: Direction;
  rounds: number[];
  floor?: { label: string; rounds: number[] };
  goal?: Goal;
  note?: string;
}): Figure {
  const value = toSeries(f.rounds, f.better);
  const floor = f.floor ? { label: f.floor.label, ...toSeries(f.floor.rounds, f.better) } : undefined;
  const ratio =
    floor && floor.median > 0 && value.median > 0 ? (f.better === 'higher' ? value.median / floor.median : floor.median / value.median) : undefined;
  const goal = f.goal ?? { kind: 'none' };
  let pass: boolean | undefined;
  if (goal.kind === 'ratio') pass = ratio !== undefined && ratio >= goal.min;
  else if (goal.kind === 'max') pass = Number.isFinite(value.median) && value.median <= goal.value;
  else if (goal.kind === 'min') pass = Number.isFinite(value.median) && value.median >= goal.value;
  return { id: f.id, label: f.label, unit: f.unit, better: f.better, value, floor, ratio, goal, pass, note: f.note };
}
