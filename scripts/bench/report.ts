// The bench report: a plain table for people (stdout), the full results as JSON and a short
// markdown table under tests/bench/results/.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Figure, Goal } from './stats.js';

export interface BenchReport {
  date: string;
  mode: 'quick' | 'full';
  machine: { cpus: number; node: string; loadavg_start: number[]; loadavg_end: number[]; quiet: boolean };
  database: { kind: 'url' | 'embedded'; label: string; lz4: boolean; server_version: string; autovacuum: string };
  corpus: Record<string, unknown>;
  seconds: number;
  figures: Figure[];
  notes: string[];
  /** Per-N results of the density section (scripts/bench/density.ts). */
  density?: unknown[];
  /** Write stages (scripts/bench/stages.ts). */
  stages?: unknown[];
  /** Sections rendered by their own module, appended to the markdown as is. */
  extra_markdown?: string;
}

const fmt = (v: number | undefined, unit = '') => {
  if (v === undefined || !Number.isFinite(v)) return '-';
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  return `${v.toFixed(digits)}${unit ? ` ${unit}` : ''}`;
};

export function describeGoal(g: Goal, unit: string): string {
  switch (g.kind) {
    case 'ratio':
      return `ratio >= ${g.min}`;
    case 'max':
      return `<= ${g.value} ${unit}`;
    case 'min':
      return `>= ${g.value} ${unit}`;
    default:
      return '-';
  }
}

const verdict = (f: Figure) => (f.pass === undefined ? '' : f.pass ? 'PASS' : 'FAIL');

function rows(figures: Figure[]): string[][] {
  return figures.map((f) => [
    f.label,
    `${fmt(f.value.median, f.unit)} (p95 ${fmt(f.value.p95)})`,
    f.floor ? fmt(f.floor.median, f.unit) : '-',
    fmt(f.ratio),
    describeGoal(f.goal, f.unit),
    verdict(f),
  ]);
}

const HEAD = ['figure', 'median (p95 of rounds)', 'floor', 'ratio', 'goal', ''];

/** The table printed at the end of a run. */
export function formatTable(report: BenchReport): string {
  const all = [HEAD, ...rows(report.figures)];
  const widths = HEAD.map((_, c) => Math.max(...all.map((r) => r[c].length)));
  const line = (r: string[]) =>
    r
      .map((cell, c) => (c === 1 || c === 2 || c === 3 ? cell.padStart(widths[c]) : cell.padEnd(widths[c])))
      .join('  ')
      .trimEnd();
  return [line(all[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...all.slice(1).map(line)].join('\n');
}

export function formatMarkdown(report: BenchReport): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const fails = report.figures.filter((f) => f.pass === false).length;
  const passes = report.figures.filter((f) => f.pass === true).length;
  return [
    `# Bench ${report.date} (${report.mode})`,
    '',
    `${report.machine.cpus} CPUs, Node ${report.machine.node}, load average ${report.machine.loadavg_start.map((x) => x.toFixed(2)).join(' ')} at start` +
      ` (${report.machine.quiet ? 'quiet' : 'busy: other work was running, figures are noisy'}); ${report.database.label}, PostgreSQL ${report.database.server_version}, lz4 ${report.database.lz4 ? 'yes' : 'no'}; ${Math.round(report.seconds)} s.`,
    '',
    `Corpus: ${Object.entries(report.corpus)
      .map(([k, v]) => `${k} ${typeof v === 'number' ? fmt(v) : String(v)}`)
      .join(', ')}.`,
    '',
    'Ratio = value / floor for throughput, floor / value for latency, time and memory (1 = as good as the floor). Goals: PASS/FAIL on the median over rounds.',
    '',
    `| ${HEAD.map(esc).join(' | ')} |`,
    `|${HEAD.map(() => '---').join('|')}|`,
    ...rows(report.figures).map((r) => `| ${r.map(esc).join(' | ')} |`),
    '',
    `${passes} PASS, ${fails} FAIL.`,
    '',
    ...report.figures
      .filter((f) => f.note || f.floor)
      .map((f) => `- ${esc(f.label)}: ${[f.floor ? `floor = ${f.floor.label}` : '', f.note ?? ''].filter(Boolean).join('; ')}`),
    ...(report.notes.length ? ['', ...report.notes.map((n) => `- ${n}`)] : []),
    '',
    ...(report.extra_markdown ? [report.extra_markdown] : []),
  ].join('\n');
}

/** Writes <dir>/<date>[-quick].json and .md; returns the two paths. */
export function writeReport(report: BenchReport, dir: string): { json: string; md: string } {
  mkdirSync(dir, { recursive: true });
  const stamp = report.date.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const base = path.join(dir, `${stamp}${report.mode === 'quick' ? '-quick' : ''}`);
  writeFileSync(`${base}.json`, JSON.stringify(report, null, 2) + '\n');
  writeFileSync(`${base}.md`, formatMarkdown(report));
  return { json: `${base}.json`, md: `${base}.md` };
}
