// Log files rotated by size: whole lines, nothing lost, at most `keep` rotated files, the file's
// inode kept (a descriptor opened on it before goes on appending to the live file).
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { openLogFile } from '../../cli/log-files.js';
import { packageRoot } from '../../src/paths.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'vcon-log-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const linesOf = (file: string, keep: number) =>
  [...Array.from({ length: keep }, (_, i) => `${file}.${keep - i}`), file]
    .filter((f) => readdirSync(dir).includes(path.basename(f)))
    .flatMap((f) => readFileSync(f, 'utf8').split('\n').filter(Boolean));

describe('openLogFile', () => {
  it('rotates past the size, keeps the newest files, and loses no line of those kept', () => {
    const file = path.join(dir, 'group.log');
    const log = openLogFile(file, { maxBytes: 1_000, keep: 3 });
    const inode = statSync(file).ino;
    // Another descriptor on the file, as the group's own fallback one.
    const other = openSync(file, 'a');
    const lines = Array.from({ length: 200 }, (_, i) => `{"n":${i},"text":"${'x'.repeat(40)}"}`);
    for (const l of lines) log.write(`${l}\n`);
    log.close();
    writeSync(other, '{"n":"after"}\n');
    closeSync(other);

    expect(
      readdirSync(dir)
        .filter((f) => f.startsWith('group.log'))
        .sort(),
    ).toEqual(['group.log', 'group.log.1', 'group.log.2', 'group.log.3']);
    expect(statSync(file).ino).toBe(inode);
    for (const n of [1, 2, 3]) {
      expect(statSync(`${file}.${n}`).size).toBeGreaterThanOrEqual(1_000);
      expect(statSync(`${file}.${n}`).size).toBeLessThan(1_000 + 60);
      expect(statSync(`${file}.${n}`).mode & 0o777).toBe(0o600);
    }
    // The last lines, in order, none missing: what the three rotated files and the live one hold.
    const kept = linesOf(file, 3);
    expect(kept.at(-1)).toBe('{"n":"after"}');
    const numbers = kept.slice(0, -1).map((l) => (JSON.parse(l) as { n: number }).n);
    expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, i) => 200 - numbers.length + i));
  });

  it('with size 0 never rotates', () => {
    const file = path.join(dir, 'plain.log');
    const log = openLogFile(file, { maxBytes: 0, keep: 3 });
    for (let i = 0; i < 100; i++) log.write(`line ${i}\n`);
    log.close();
    expect(readdirSync(dir).filter((f) => f.startsWith('plain.log'))).toEqual(['plain.log']);
  });
});

describe('rotateOwnLog', () => {
  it("rotates the supervisor's own stderr file, losing none of its lines", () => {
    const file = path.join(dir, 'supervisor.log');
    const fd = openSync(file, 'a', 0o600);
    // A process whose stdout and stderr are the file, as the supervisor's are.
    const script = `
      const { rotateOwnLog } = await import(${JSON.stringify(path.join(packageRoot, 'dist', 'cli', 'log-files.js'))});
      for (let i = 0; i < 300; i++) {
        process.stderr.write('note ' + i + ' ' + 'y'.repeat(30) + '\\n');
        rotateOwnLog(${JSON.stringify(file)}, { maxBytes: 2000, keep: 20 });
      }`;
    spawnSync(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    const notes = linesOf(file, 20).map((l) => Number(l.split(' ')[1]));
    expect(notes).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(readdirSync(dir).filter((f) => f.startsWith('supervisor.log.')).length).toBeGreaterThan(3);
  });
});
