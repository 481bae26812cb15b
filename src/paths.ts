import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Works from src/ (tsx, vitest) and from dist/src/ (compiled): walk up to our package.json.
function findPackageRoot(start: string): string {
  let dir = start;
  for (;;) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return start;
    dir = parent;
  }
}

/** Absolute path of the project (where package.json lives). */
export const packageRoot = findPackageRoot(path.dirname(fileURLToPath(import.meta.url)));
