// Human output: aligned tables on stdout, notes and errors on stderr.

/** Formats rows as an aligned plain-text table with a header line. */
export function formatTable(header: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined || c === '' ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i])))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/**
 * A launcher command as an operator can paste it: through npx (the bin is not on PATH in a clone),
 * and with --instances-dir when this run used another registry than the default.
 */
export function commandHint(args: string, instancesDir?: string): string {
  const dirFlag = instancesDir && instancesDir !== 'instances' ? ` --instances-dir ${JSON.stringify(instancesDir)}` : '';
  return `npx vcon-launch ${args}${dirFlag}`;
}

/** A line for people on stderr, tagged so it stands out among children's log lines. */
export function note(message: string): void {
  process.stderr.write(`vcon-launch: ${message}\n`);
}

/** The logger shape src/db expects ({info, warn}), printing short notes on stderr. */
export function createNoteLog(verbose = true) {
  const fmt = (obj: object, msg: string) => {
    const parts = Object.entries(obj).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
    return parts.length ? `${msg} (${parts.join(', ')})` : msg;
  };
  return {
    info(obj: object, msg: string) {
      if (verbose) note(fmt(obj, msg));
    },
    warn(obj: object, msg: string) {
      note(`warning: ${fmt(obj, msg)}`);
    },
  };
}
