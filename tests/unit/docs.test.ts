// The project carries its own reference: README and docs/ point only at files inside the repository
// (or at the running service), and docs/api.md lists exactly the error codes the code uses.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { ERROR_CODES } from '../../src/domain/responses.js';
import { packageRoot } from '../../src/paths.js';

const DOCS = ['README.md', 'env/README.md', ...readdirSync(path.join(packageRoot, 'docs')).map((f) => `docs/${f}`)];
const read = (f: string) => readFileSync(path.join(packageRoot, f), 'utf8');

describe('documentation stays inside the repository', () => {
  test.each(DOCS)('%s links only to files that exist in the repository', (file) => {
    const text = read(file);
    // Markdown links to relative targets (not http(s), not anchors alone).
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((t) => !/^[a-z]+:/.test(t) && !t.startsWith('#'));
    for (const t of targets) {
      const resolved = path.resolve(path.dirname(path.join(packageRoot, file)), t.split('#')[0]);
      expect(resolved.startsWith(packageRoot + path.sep) || resolved === packageRoot, `${file}: ${t}`).toBe(true);
      expect(existsSync(resolved), `${file}: ${t} does not exist`).toBe(true);
    }
    // No path that leaves the repository, in links or in prose.
    expect(text, file).not.toMatch(/\.\.\/shared|\/work\/shared|`\.\.\/[^`]*`/);
  });

  test('README links to the REST contract and the design notes', () => {
    const readme = read('README.md');
    expect(readme).toContain('](docs/api.md');
    expect(readme).toContain('](docs/architecture.md)');
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
