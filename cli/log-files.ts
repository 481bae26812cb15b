// The log files of detached groups (instances/<instance>.log) and of their supervisor
// (instances/supervisor.log), rotated by size. The supervisor is the one writer of each file: a
// group's output reaches it through a pipe and it appends whole lines, synchronously; its own
// notes go to its stderr, the supervisor log. So a rotation, a copy of the file to <file>.1 and a
// truncation to 0 on the same thread, has no moment in which a line can be written and lost, and
// the file keeps its inode: a descriptor opened on it before (the group's fallback, an operator's
// `tail -f`) goes on writing and reading at its end.
import { chmodSync, closeSync, copyFileSync, existsSync, fstatSync, ftruncateSync, openSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';

/** When a log file is rotated: past `maxBytes` (0: never), keeping `keep` rotated files (<file>.1 is the newest). */
export interface LogRotation {
  maxBytes: number;
  keep: number;
}

/** Shifts <file>.1 … to <file>.2 …, drops what is past `keep`, and moves the content of `fd` (open on `file`) to <file>.1. */
function rotate(file: string, fd: number, keep: number): void {
  rmSync(`${file}.${keep}`, { force: true });
  for (let i = keep - 1; i >= 1; i--) if (existsSync(`${file}.${i}`)) renameSync(`${file}.${i}`, `${file}.${i + 1}`);
  copyFileSync(file, `${file}.1`);
  chmodSync(`${file}.1`, 0o600);
  ftruncateSync(fd, 0);
}

export interface LogFile {
  /** The descriptor the file is appended through (O_APPEND). */
  fd: number;
  /** Appends whole lines; rotates once the file has reached its size. */
  write(text: string): void;
  close(): void;
}

/** Opens a log file for appending (mode 0600: other groups' users cannot read it). */
export function openLogFile(file: string, rotation: LogRotation): LogFile {
  const fd = openSync(file, 'a', 0o600);
  chmodSync(file, 0o600);
  let open = true;
  // Counted here, and read from the file only when the count says it is due (an outside
  // copytruncate may have emptied it meanwhile): one system call a line, not two.
  let size = fstatSync(fd).size;
  return {
    fd,
    write(text) {
      if (!open) return;
      const buf = Buffer.from(text);
      for (let at = 0; at < buf.length;) at += writeSync(fd, buf, at);
      size += buf.length;
      if (rotation.maxBytes <= 0 || size < rotation.maxBytes) return;
      size = fstatSync(fd).size;
      if (size < rotation.maxBytes) return;
      rotate(file, fd, rotation.keep);
      size = 0;
    },
    close() {
      if (!open) return;
      open = false;
      closeSync(fd);
    },
  };
}

/**
 * Rotates the supervisor's own log when it has reached its size: its stdout and stderr are that
 * file (it was started so), and it writes them synchronously, so nothing is written between the
 * copy and the truncation. Does nothing when stderr is not that file (a supervisor run by hand).
 */
export function rotateOwnLog(file: string, rotation: LogRotation): void {
  if (rotation.maxBytes <= 0) return;
  try {
    const own = fstatSync(2);
    const onDisk = statSync(file);
    if (!own.isFile() || own.ino !== onDisk.ino || own.dev !== onDisk.dev || own.size < rotation.maxBytes) return;
    rotate(file, 2, rotation.keep);
  } catch {
    /* no such file, or not ours: nothing to rotate */
  }
}
