// Micro bench of the default embedder (npm run bench:embed): µs per word and per text of the
// default provider's embed (one call per text set) on the texts the indexer embeds (each non-party unit, then the whole
// text) of the fixture vCons, the search dev set and the bench corpus generator. Steady state
// (the word cache warm, as in a running group) and cold (a fresh encoder per pass).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config.js';
import { decodeBodies, extractUnits } from '../../src/search/units.js';
import { embeddingsCacheDir } from '../../src/embeddings/index.js';
import { ensureCache, openCache } from '../../src/embeddings/glove-cache.js';
import { createGloveProvider } from '../../src/embeddings/glove.js';
import { tokenize } from '../../src/embeddings/text.js';
import { packageRoot } from '../../src/paths.js';
import type { JsonObject } from '../../src/domain/vcon.js';
import { generateVcon } from './corpus.js';
import { devSetDir } from './devset.js';
import { embeddableUnits, wholeText } from '../../src/services/search-indexer.js';
import { isMain } from '../embeddings/util.js';

/**
 * What gets embedded of one vCon: each non-party unit's text (a search embeds a page's units at
 * query time) and all of them as one text (the indexer's vCon vector).
 */
export async function embedTexts(doc: JsonObject): Promise<{ units: string[]; whole: string[] }> {
  const units = embeddableUnits(extractUnits(doc, await decodeBodies(doc)));
  return { units: units.map((u) => u.body), whole: units.length === 0 ? [] : [wholeText(units)] };
}

/** The bench's text sets: unit texts and whole texts of the fixture vCons, the dev set's vCons (when present), 100 corpus vCons. */
export async function embedTextSets(): Promise<{ name: string; vcons: number; texts: string[] }[]> {
  const dir = path.join(packageRoot, 'tests', 'fixtures', 'vcons');
  const fixtures = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as JsonObject);
  const sets = [{ name: 'fixtures', docs: fixtures }];
  const devSet = path.join(devSetDir(), 'conversations.json');
  if (existsSync(devSet))
    sets.push({ name: 'search-dev', docs: (JSON.parse(readFileSync(devSet, 'utf8')) as { vcon: JsonObject }[]).map((c) => c.vcon) });
  sets.push({ name: 'corpus', docs: Array.from({ length: 100 }, (_, i) => generateVcon(1, i) as JsonObject) });
  const out = [];
  for (const s of sets) {
    const units: string[] = [];
    const whole: string[] = [];
    for (const d of s.docs) {
      const t = await embedTexts(d);
      units.push(...t.units);
      whole.push(...t.whole);
    }
    out.push({ name: `${s.name} units`, vcons: s.docs.length, texts: units }, { name: `${s.name} whole`, vcons: s.docs.length, texts: whole });
  }
  return out;
}

const cpuMs = () => process.cpuUsage().user / 1000 + process.cpuUsage().system / 1000;

async function main() {
  const file = await ensureCache(embeddingsCacheDir(loadConfig().dataDir));
  const wv = openCache(file);
  const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 20;
  process.stdout.write(
    '| texts | vCons | texts | words | warm µs/word | warm µs/text | warm ms/100 vCons | cold µs/word |\n|---|---|---|---|---|---|---|---|\n',
  );
  for (const s of await embedTextSets()) {
    const words = s.texts.reduce((n, t) => n + tokenize(t).length, 0);
    // Cold: a fresh encoder, so every word is looked up in the table once.
    const cold = createGloveProvider(async () => wv);
    await cold.warm?.();
    let t0 = cpuMs();
    await cold.embed(s.texts);
    const coldMs = cpuMs() - t0;
    const provider = createGloveProvider(async () => wv);
    await provider.embed(s.texts);
    // The median round: the machine is shared, a round that lost its core to a neighbour is an outlier.
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) {
      t0 = cpuMs();
      await provider.embed(s.texts);
      times.push(cpuMs() - t0);
    }
    const ms = times.sort((a, b) => a - b)[rounds >> 1];
    const f = (x: number, d = 2) => x.toFixed(d);
    process.stdout.write(
      `| ${s.name} | ${s.vcons} | ${s.texts.length} | ${words} | ${f((ms * 1000) / words, 3)} | ${f((ms * 1000) / s.texts.length, 1)} | ${f((ms * 100) / s.vcons, 1)} | ${f((coldMs * 1000) / words, 3)} |\n`,
    );
  }
  wv.close();
}

if (isMain(import.meta.url)) await main();
