// The project carries its own reference: README is the quick start and links to docs/, every
// relative link of README and docs/ reaches a file (and heading) of the repository, docs/api.md lists
// exactly the error codes the code uses, and no doc, comment or test name cites a file outside the
// repository (the specs the project started from) or an issue number instead of saying what was
// decided. Left out of the scans: tests/fixtures (third-party files kept byte for byte, with their
// source notes) and tests/bench/results (reports of past bench runs, kept as they were written).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { EnvSchema } from '../../src/config.js';
import { ERROR_CODES } from '../../src/domain/responses.js';
import { packageRoot } from '../../src/paths.js';

const read = (f: string) => readFileSync(path.join(packageRoot, f), 'utf8');
const DOC_FILES = readdirSync(path.join(packageRoot, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);
const DOCS = ['README.md', 'env/README.md', 'instances/README.md', 'patches/README.md', ...DOC_FILES];

/** Every file under `dir` (relative to the package root), skipping build output and dependencies. */
function walk(dir: string, skip: readonly string[] = []): string[] {
  const out: string[] = [];
  const visit = (rel: string) => {
    for (const name of readdirSync(path.join(packageRoot, rel))) {
      const f = `${rel}/${name}`;
      if (['node_modules', 'dist'].includes(name) || skip.some((s) => f === s || f.startsWith(`${s}/`))) continue;
      if (statSync(path.join(packageRoot, f)).isDirectory()) visit(f);
      else if (/\.(ts|mts|js|mjs|md|sql|env|json)$|^Dockerfile$|^run$/.test(name)) out.push(f);
    }
  };
  visit(dir);
  return out;
}
const ROOT_FILES = ['README.md', 'Dockerfile', '.ci/run', 'eslint.config.js', 'vitest.config.ts', 'vitest.hardening.config.ts', 'package.json'];
const SKIPPED = ['tests/fixtures', 'tests/bench/results'];
const SOURCES = [...ROOT_FILES, ...['src', 'cli', 'scripts', 'docs', 'env', 'bin', 'tests'].flatMap((d) => walk(d, SKIPPED))];

/** Markdown without its fenced code blocks (a `# comment` in a shell block is no heading). */
const prose = (md: string) => md.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');

/** GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped, spaces as hyphens, repeats numbered). */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(md).matchAll(/^#{1,6}[ \t]+(.+?)[ \t]*#*$/gm)) {
    const base = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

// The specs the project was started from live outside the repository: docs describe what they
// decided, they don't send a reader to them. Built from parts so this file does not match itself.
const OUTSIDE_SPECS = new RegExp(`\\b(${['SPEC', 'API', 'STYLE', 'STACK', 'LESSONS', 'ARCHITECTURE'].join('|')})\\.md\\b`);
// "issue" or "issues" and a number, or "#" and one to three digits (an upstream reference is
// owner/repo#N, and identifiers in examples such as `#48213` are longer or quoted as code).
const ISSUE_REF = /\bissues? #?\d+|(?<![\w/`&])#\d{1,3}\b/i;

/** What of a test file is prose: its comments and the names of its tests and suites (not its data). */
function testProse(src: string): string {
  const comments = [...src.matchAll(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g)].map((m) => m[0]);
  const names = [...src.matchAll(/\b(?:it|test|describe)(?:\.\w+)*\(\s*(['"`])((?:\\.|(?!\1)[\s\S])*?)\1/g)].map((m) => m[2]);
  return [...comments, ...names].join('\n');
}

describe('documentation stays inside the repository', () => {
  test.each(DOCS)('%s links only to files and headings that exist in the repository', (file) => {
    const text = prose(read(file));
    // Markdown links to relative targets (not http(s) or other schemes).
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((t) => !/^[a-z]+:/.test(t));
    for (const t of targets) {
      const [target, anchor] = t.split('#');
      const resolved = target ? path.resolve(path.dirname(path.join(packageRoot, file)), target) : path.join(packageRoot, file);
      expect(resolved.startsWith(packageRoot + path.sep) || resolved === packageRoot, `${file}: ${t}`).toBe(true);
      expect(existsSync(resolved), `${file}: ${t} does not exist`).toBe(true);
      if (anchor && resolved.endsWith('.md'))
        expect([...anchors(readFileSync(resolved, 'utf8'))], `${file}: ${t}: no such heading`).toContain(anchor);
    }
    // No path that leaves the repository, in links or in prose.
    expect(text, file).not.toMatch(/\.\.\/shared|\/work\/shared|`\.\.\/[^`]*`/);
  });

  test('no doc, comment or test name cites the outside specs or an issue number', () => {
    const found: string[] = [];
    for (const f of SOURCES) {
      const src = read(f);
      const text = f.startsWith('tests/') && !f.endsWith('.md') ? testProse(src) : src;
      text.split('\n').forEach((line) => {
        if (OUTSIDE_SPECS.test(line) || ISSUE_REF.test(line)) found.push(`${f}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });

  test('the scans see what they are meant to catch', () => {
    for (const bad of ['see SPEC.md', 'API.md "Search"', '(issue 17)', 'issues 15 and 17', 'Issue 14 finding 5', 'parameter (#20)'])
      expect(OUTSIDE_SPECS.test(bad) || ISSUE_REF.test(bad), bad).toBe(true);
    for (const fine of ['docs/api.md "Search"', 'porsager/postgres#1119', 'an order number `#48213`', 'zod issues', 'Delivery issue ${i}'])
      expect(OUTSIDE_SPECS.test(fine) || ISSUE_REF.test(fine), fine).toBe(false);
    const n = 3;
    expect(testProse(`/${'/'} issue ${n}\nit('names #${n}', () => { subject: 'x issue ${n}' })`)).toBe(`/${'/'} issue ${n}\nnames #${n}`);
    expect(SOURCES).toEqual(expect.arrayContaining(['src/main.ts', 'cli/index.ts', 'docs/api.md', 'README.md', 'tests/unit/docs.test.ts']));
    expect(SOURCES.some((f) => f.startsWith('tests/fixtures/'))).toBe(false);
  });
});

describe('README is the quick start; the reference is in docs/', () => {
  const readme = read('README.md');

  test('README stays under 25 KB', () => {
    expect(Buffer.byteLength(readme)).toBeLessThan(25_000);
  });

  test('README opens with the two commands a newcomer types on a fresh clone', () => {
    const blocks = [...readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1].trim());
    expect(blocks.slice(0, 2)).toEqual(['npm ci && npx vcon-launch start --group demo', 'npm ci && npm test']);
    expect(readme.indexOf('npm ci && npx vcon-launch start --group demo')).toBeLessThan(1500);
  });

  test('README says how long npm test takes', () => {
    expect(readme).toMatch(/How long `npm test` takes[^\n]*\d+ minutes/);
  });

  test('README links to every file of docs/', () => {
    for (const f of DOC_FILES) expect(readme, f).toContain(`](${f})`);
  });

  test('README links to the REST contract and the design notes', () => {
    expect(readme).toContain('](docs/api.md');
    expect(readme).toContain('](docs/architecture.md)');
  });

  test('docs/configuration.md names every variable the server reads', () => {
    const doc = read('docs/configuration.md');
    for (const name of Object.keys(EnvSchema.shape)) expect(doc, name).toContain(`\`${name}\``);
  });

  test('every `npm run` script the docs name exists', () => {
    const scripts = Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);
    for (const f of ['README.md', ...DOC_FILES])
      for (const m of read(f).matchAll(/npm run ([\w:-]+)/g)) expect(scripts, `${f}: npm run ${m[1]}`).toContain(m[1]);
  });

  test('docs/api.md lists every error code of every status', () => {
    const api = read('docs/api.md');
    for (const [status, codes] of Object.entries(ERROR_CODES)) {
      const row = new RegExp(`^\\| ${status} \\|(.*)$`, 'm').exec(api);
      expect(row, `no row for ${status}`).not.toBeNull();
      for (const code of codes) expect(row![1], `${status} ${code}`).toContain(`\`${code}\``);
    }
  });
});
