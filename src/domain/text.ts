// Text PostgreSQL can hold: no NUL (text can't store it, and a `\u0000` anywhere in a json
// document makes every ->> of that document fail) and no unpaired UTF-16 surrogate (json accepts
// the escape, reading it as text fails). Such input is refused at validation, naming the field.
import { formatPath, type ErrorDetail } from './errors.js';

/** Why a string can't be stored as PostgreSQL text, or undefined when it can. */
export function textProblem(s: string): string | undefined {
  if (s.includes('\u0000')) return 'must not contain NUL characters (\\u0000)';
  if (!s.isWellFormed()) return 'must not contain unpaired UTF-16 surrogates (\\ud800-\\udfff alone)';
  return undefined;
}

interface Step {
  up: Step | null;
  key: string | number;
}

const pathOf = (prefix: readonly (string | number)[], step: Step | null): string => {
  const keys: (string | number)[] = [];
  for (let s = step; s; s = s.up) keys.push(s.key);
  return formatPath([...prefix, ...keys.reverse()]);
};

/**
 * Whether any field name or string value of a JSON value can't be stored. Nearly every document
 * passes: this pass keeps no paths and allocates nothing per value (the walk with paths below
 * allocated two objects per value, more than half of a plain vCon's validation).
 */
function anyUnstorable(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (textProblem(v) !== undefined) return true;
    } else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push(v[i]);
    } else if (typeof v === 'object' && v !== null) {
      for (const k of Object.keys(v)) {
        if (textProblem(k) !== undefined) return true;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
  }
  return false;
}

/** Every field name and string value of a JSON value that PostgreSQL can't hold (the first `max`), with its path. */
export function unstorableText(value: unknown, prefix: readonly (string | number)[] = [], max = 20): ErrorDetail[] {
  if (!anyUnstorable(value)) return [];
  const out: ErrorDetail[] = [];
  // Iterative (documents may nest deep); paths are built only for the problems found.
  const stack: [unknown, Step | null][] = [[value, null]];
  while (stack.length && out.length < max) {
    const [v, step] = stack.pop()!;
    if (typeof v === 'string') {
      const problem = textProblem(v);
      if (problem) out.push({ path: pathOf(prefix, step), message: problem });
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], { up: step, key: i }]);
    } else if (typeof v === 'object' && v !== null) {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--) {
        const k = keys[i];
        const at = { up: step, key: k };
        const problem = textProblem(k);
        if (problem) out.push({ path: pathOf(prefix, at), message: `field name ${problem}` });
        stack.push([(v as Record<string, unknown>)[k], at]);
      }
    }
  }
  return out;
}
