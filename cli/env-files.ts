// The launcher's one reader and editor of env files, on dotenv's own parser: what `start` reads is
// exactly what `check` validated and what `provision` rewrote.
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parse as parseDotenv } from 'dotenv';

/** The variables of an env file ({} when it does not exist). */
export function readEnvFile(file: string): Record<string, string> {
  return existsSync(file) ? parseDotenv(readFileSync(file, 'utf8')) : {};
}

/** The variable a line assigns, as dotenv reads it (undefined for comments and blank lines). */
const variableOf = (line: string): string | undefined => Object.keys(parseDotenv(line))[0];

/**
 * Sets one variable in an env file, keeping every other line and comment: the first assignment is
 * replaced, later ones are dropped, and a missing one is appended under `comment`. With `secret`
 * the file becomes readable by its owner only.
 */
export function setEnvVariable(file: string, key: string, value: string, opts: { comment?: string; secret?: boolean } = {}): void {
  const out: string[] = [];
  let done = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (variableOf(line) !== key) out.push(line);
    else if (!done) {
      out.push(`${key}=${value}`);
      done = true;
    }
  }
  if (!done) {
    if (out.length && out[out.length - 1] === '') out.pop();
    out.push(...(opts.comment ? [`# ${opts.comment}`] : []), `${key}=${value}`, '');
  }
  writeFileSync(file, out.join('\n'), opts.secret ? { mode: 0o600 } : {});
  if (opts.secret) chmodSync(file, 0o600);
}
