// Bulk rows through COPY ... FROM STDIN (FORMAT binary): vectors go as their raw bytes, not as
// hex text in thousands of bind parameters (issue 17). Only the column types the index writes use.
import type { Db } from './client.js';

export type CopyType = 'uuid' | 'text' | 'int4' | 'bytea' | 'timestamptz' | 'bit';
export type CopyValue = string | number | Uint8Array | Date | null;

const HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
const TRAILER = Buffer.from([0xff, 0xff]);
// timestamptz is microseconds since 2000-01-01 UTC.
const PG_EPOCH_MS = 946_684_800_000;

function field(type: CopyType, v: CopyValue): Buffer {
  let body: Buffer;
  switch (type) {
    case 'uuid':
      body = Buffer.from((v as string).replace(/-/g, ''), 'hex');
      break;
    case 'text':
      body = Buffer.from(v as string, 'utf8');
      break;
    case 'int4':
      body = Buffer.alloc(4);
      body.writeInt32BE(v as number);
      break;
    case 'bytea': {
      const b = v as Uint8Array;
      body = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
      break;
    }
    case 'timestamptz':
      body = Buffer.alloc(8);
      body.writeBigInt64BE(BigInt((v as Date).getTime() - PG_EPOCH_MS) * 1000n);
      break;
    case 'bit': {
      // varbit's binary form: the length in bits, then the bits packed from the high end.
      const b = v as Uint8Array;
      body = Buffer.alloc(4 + b.byteLength);
      body.writeInt32BE(b.byteLength * 8);
      body.set(b, 4);
      break;
    }
  }
  const len = Buffer.alloc(4);
  len.writeInt32BE(body.length);
  return Buffer.concat([len, body]);
}

/** Appends rows to a table with one binary COPY; `columns` name the table's columns and their types. */
export async function copyBinary(db: Db, table: string, columns: [string, CopyType][], rows: CopyValue[][]): Promise<void> {
  if (rows.length === 0) return;
  const parts: Buffer[] = [HEADER];
  const count = Buffer.alloc(2);
  count.writeInt16BE(columns.length);
  for (const row of rows) {
    parts.push(count);
    columns.forEach(([, type], k) => {
      const v = row[k];
      if (v === null) {
        const nul = Buffer.alloc(4);
        nul.writeInt32BE(-1);
        parts.push(nul);
      } else parts.push(field(type, v));
    });
  }
  parts.push(TRAILER);
  // Table and column names are constants of the calling repo, never input.
  const stream = await db`copy ${db(table)} (${db(columns.map((c) => c[0]))}) from stdin (format binary)`.writable();
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject);
    stream.on('finish', resolve);
    stream.end(Buffer.concat(parts));
  });
}
