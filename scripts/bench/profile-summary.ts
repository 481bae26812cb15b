// Summarises a V8 .cpuprofile (node --cpu-prof, written by `npm run bench -- --profile`): self
// time by function and by file or package, and inclusive time of the functions named with --focus.
// Usage: node dist/scripts/bench/profile-summary.js <file.cpuprofile> [--top 25] [--focus name,...] [--callers name]
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const where = (url: string) => {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  const d = /\/(dist\/.*)$/.exec(url);
  return d ? d[1] : url || '(native)';
};

export function summariseProfile(p: Profile, opts: { top?: number; focus?: string[]; callers?: string } = {}): string {
  const top = opts.top ?? 25;
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const fnKey = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  for (const [id, ms] of self) {
    const n = byId.get(id)!;
    byFn.set(fnKey(n), (byFn.get(fnKey(n)) ?? 0) + ms);
    const f = n.callFrame.url ? where(n.callFrame.url) : n.callFrame.functionName;
    byFile.set(f, (byFile.get(f) ?? 0) + ms);
  }
  const inclusive = new Map<string, number>();
  for (const name of opts.focus ?? []) {
    let ms = 0;
    for (const [id, t] of self) {
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
        if (byId.get(cur)!.callFrame.functionName === name) {
          ms += t;
          break;
        }
      }
    }
    inclusive.set(name, ms);
  }
  // Self time of one function, split by the chain of its nearest three callers.
  const callers = new Map<string, number>();
  if (opts.callers) {
    for (const [id, t] of self) {
      if (byId.get(id)!.callFrame.functionName !== opts.callers) continue;
      const chain: string[] = [];
      for (let cur = parent.get(id); cur !== undefined && chain.length < 3; cur = parent.get(cur)) chain.push(fnKey(byId.get(cur)!));
      const key = chain.join(' < ');
      callers.set(key, (callers.get(key) ?? 0) + t);
    }
  }
  const table = (title: string, m: Map<string, number>) =>
    [
      title,
      ...[...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([k, ms]) => `${ms.toFixed(0).padStart(8)} ms ${((100 * ms) / total).toFixed(1).padStart(5)}%  ${k}`),
    ].join('\n');
  return [
    `total sampled ${total.toFixed(0)} ms`,
    table('self time by file or package:', byFile),
    table('self time by function:', byFn),
    ...(inclusive.size ? [table('inclusive time of focus functions:', inclusive)] : []),
    ...(callers.size ? [table(`callers of ${opts.callers}:`, callers)] : []),
  ].join('\n\n');
}

const invokedDirectly = (() => {
  try {
    return realpathSync(process.argv[1] ?? '') === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
})();

if (invokedDirectly) {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith('--'));
  if (!file) {
    process.stderr.write('usage: profile-summary <file.cpuprofile> [--top N] [--focus fn1,fn2] [--callers fn]\n');
    process.exit(2);
  }
  const opt = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  process.stdout.write(
    `${summariseProfile(profile, { top: Number(opt('--top') ?? 25), focus: opt('--focus')?.split(','), callers: opt('--callers') })}\n`,
  );
}
