// The lines of a file read a chunk at a time, never more than one line and one chunk in memory:
// `import` streams an .ndjson dump of any size this way, and a line longer than a request body
// could ever be is skipped over (its length counted), not buffered.
import type { FileHandle } from 'node:fs/promises';

/** One line (without its newline) or, for a line over the limit, its length only. */
export type Line = { n: number; bytes: Buffer; over?: undefined } | { n: number; bytes?: undefined; over: number };

/** Bytes held now and at most: what `import --json` reports as peak_buffered_bytes. */
export interface Meter {
  now: number;
  peak: number;
}

export const createMeter = (): Meter => ({ now: 0, peak: 0 });

export function hold(meter: Meter | undefined, bytes: number): void {
  if (!meter) return;
  meter.now += bytes;
  if (meter.now > meter.peak) meter.peak = meter.now;
}

/** The size of each read: large enough that reads cost little next to parsing, small next to a batch. */
export const CHUNK_BYTES = 256 * 1024;

/**
 * The lines of an open file from its start, numbered from 1; the last one needs no newline. A
 * line's bytes may be a view of the read buffer: valid until the next line is asked for (copy
 * what must outlive it). A line longer than `maxLine` bytes comes as its length alone.
 */
export async function* readLines(handle: FileHandle, opts: { maxLine: number; chunk?: number; meter?: Meter }): AsyncGenerator<Line> {
  const chunk = opts.chunk ?? CHUNK_BYTES;
  const buf = Buffer.allocUnsafe(chunk);
  hold(opts.meter, chunk);
  // The start of the current line when it spans reads (copies), and its length so far.
  let parts: Buffer[] = [];
  let length = 0;
  let over = false;
  let n = 1;
  let position = 0;
  const drop = () => {
    hold(opts.meter, -parts.reduce((s, p) => s + p.length, 0));
    parts = [];
  };
  try {
    for (;;) {
      const { bytesRead } = await handle.read(buf, 0, chunk, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      const data = buf.subarray(0, bytesRead);
      let start = 0;
      while (start < bytesRead) {
        const nl = data.indexOf(0x0a, start);
        const end = nl < 0 ? bytesRead : nl;
        const piece = data.subarray(start, end);
        length += piece.length;
        if (!over && length > opts.maxLine) {
          over = true;
          drop();
        }
        if (nl < 0) {
          if (!over) {
            parts.push(Buffer.from(piece));
            hold(opts.meter, piece.length);
          }
          break;
        }
        if (over) yield { n, over: length };
        else if (parts.length) {
          const line = Buffer.concat([...parts, piece]);
          hold(opts.meter, piece.length);
          yield { n, bytes: line };
          drop();
          hold(opts.meter, -piece.length);
        } else yield { n, bytes: piece };
        n++;
        length = 0;
        over = false;
        start = nl + 1;
      }
    }
    if (over) yield { n, over: length };
    else if (length > 0) yield { n, bytes: Buffer.concat(parts) };
  } finally {
    drop();
    hold(opts.meter, -chunk);
  }
}
