import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/paths.js';

/** The 40 real vCons of shared/fixtures (copied with their SOURCES.md into tests/fixtures/vcons). */
export const FIXTURES_DIR = path.join(packageRoot, 'tests', 'fixtures', 'vcons');

export function loadFixtures(): { name: string; text: string; json: any }[] {
  return readdirSync(FIXTURES_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((name) => {
      const text = readFileSync(path.join(FIXTURES_DIR, name), 'utf8');
      return { name, text, json: JSON.parse(text) };
    });
}
