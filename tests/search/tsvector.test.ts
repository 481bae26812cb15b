// The ranking tsvector made in the indexer (src/search/tsvector.ts) must be the one PostgreSQL's
// to_tsvector makes, by = and byte for byte (tsvectorsend): for every text the fast path accepts,
// random ones built to hit the parser's special cases (hyphens, dots, colons, numbers next to words,
// URLs, addresses, non-ASCII), random e-mail addresses and phone numbers, and real ones (party texts
// of the fixtures and the bench corpus above all); and the stored vcon_search rows of indexed vCons
// (fast path and to_tsvector mixed) equal the statement that wrote them before. Real PostgreSQL.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createSearch } from '../../src/search.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { internalCtx } from '../../src/services/context.js';
import {
  CASE_PROBE,
  createLexicon,
  joinTsvectors,
  parseTsvector,
  plainTokens,
  positionsOf,
  tsvectorText,
  type Tsv,
} from '../../src/search/tsvector.js';
import { createSearchIndexRepo, unitRows } from '../../src/db/search-index-repo.js';
import { recordStages, type StageTotals } from '../../src/stages.js';
import { copyBinary } from '../../src/db/copy-binary.js';
import { classifyVcon, type JsonObject } from '../../src/domain/vcon.js';
import { decodeBodies, extractUnits, type SearchUnit } from '../../src/search/units.js';
import { generateVcon } from '../../scripts/bench/corpus.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { buildVcon } from './builders.js';

const configFor = (schema: string) => parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema, LOG_LEVEL: 'silent' });

// Fixed seeds and counts: the same texts every run. The differential tests against PostgreSQL take
// ~15 s alone and over a minute beside a second full run on 2 cores: a ceiling for a hang.
const FUZZ_TIMEOUT_MS = 600_000;

/** Random texts made of the pieces the default parser treats specially, joined with and without blanks. */
function fuzzTexts(count: number, seed = 17): string[] {
  const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) / 0x80000000;
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)];
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  const word = () => {
    if (rnd() < 0.3) return pick(['the', 'a', 'is', 'it', 's', 't', 'don', 'running', 'Kettles', 'ran', 'ies', 'sky', 'Organization', 'e', 'g']);
    let w = '';
    for (let n = 1 + Math.floor(rnd() * 9); n > 0; n--) w += pick([...letters]);
    return w;
  };
  const number = () => String(Math.floor(rnd() * 10 ** (1 + Math.floor(rnd() * 7)))).padStart(rnd() < 0.1 ? 4 : 1, '0');
  const blanks = [
    ' ',
    ' ',
    ' ',
    '  ',
    '\n',
    '\t',
    '\r\n',
    ', ',
    '; ',
    '! ',
    '? ',
    ' (',
    ') ',
    '"',
    "'",
    ' [',
    '] ',
    '{',
    '}',
    '*',
    '=',
    '|',
    '%',
    '$',
    '^',
    '#',
    '`',
  ];
  const joins = [
    '.',
    '. ',
    '..',
    '...',
    '....',
    ':',
    ': ',
    ':.',
    '-',
    ' - ',
    '--',
    '- ',
    ' -',
    "'",
    '',
    '',
    '/',
    '@',
    '_',
    '+',
    '~',
    '&',
    '<',
    '>',
    '\\',
    'é',
    '·',
    '\u00a0',
  ];
  const out: string[] = [];
  for (let t = 0; t < count; t++) {
    // Half the texts rarely join (mostly taken by the fast path), half often (mostly refused).
    const joinShare = t % 2 === 0 ? 0.08 : 0.3;
    let s = rnd() < 0.2 ? pick([...blanks, ...joins]) : '';
    for (let n = 1 + Math.floor(rnd() * 25); n > 0; n--) {
      s += rnd() < 0.75 ? word() : number();
      // Mostly blanks (texts the fast path takes), sometimes the joins that make other tokens.
      for (let k = rnd() < 0.7 ? 1 : 1 + Math.floor(rnd() * 3); k > 0; k--) s += rnd() < joinShare ? pick(joins) : pick(blanks);
    }
    out.push(rnd() < 0.5 ? s.trimEnd() : s);
  }
  return out;
}

/** The test fixtures' documents. */
function fixtureDocs(): JsonObject[] {
  const dir = path.resolve(import.meta.dirname, '../fixtures/vcons');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as JsonObject);
}

/** The search units of each plain document (of no other kind, nor of invalid fixtures). */
async function unitsOfDocs(docs: JsonObject[]): Promise<SearchUnit[][]> {
  const out: SearchUnit[][] = [];
  for (const d of docs) {
    let c: ReturnType<typeof classifyVcon>;
    try {
      c = classifyVcon(d);
    } catch {
      continue; // fixtures of invalid documents
    }
    if (c.kind === 'plain') out.push(extractUnits(c.doc, await decodeBodies(c.doc)));
  }
  return out;
}

/** Real texts: the unit texts of the test fixtures and of the bench corpus, whole and per unit. */
async function realTexts(): Promise<string[]> {
  const docs = fixtureDocs();
  for (let i = 0; i < 60; i++) docs.push(generateVcon(5, i) as JsonObject);
  return (await unitsOfDocs(docs)).flatMap((units) => [...units.map((u) => u.body), units.map((u) => u.body).join(' . the the the . ')]);
}

/** The party units joined as a vCon's weight B joins them (search-index-repo.ts UNIT_GAP). */
const PARTY_GAP = ' . the the the . ';

/** Party texts: of the test fixtures and of the bench corpus, per party and joined per vCon. */
async function partyTexts(corpus = 500): Promise<{ fixtures: string[]; bench: string[] }> {
  const party = async (docs: JsonObject[]) =>
    (await unitsOfDocs(docs)).flatMap((units) => {
      const bodies = units.filter((u) => u.source === 'party').map((u) => u.body);
      return bodies.length > 0 ? [...bodies, bodies.join(PARTY_GAP)] : [];
    });
  return {
    fixtures: await party(fixtureDocs()),
    bench: await party(Array.from({ length: corpus }, (_, i) => generateVcon(5, i) as JsonObject)),
  };
}

/**
 * Random party-like texts: names, e-mail addresses (local parts and hosts of letters, digits, '.',
 * '-', '_', '+', capitals, doubled or trailing separators, short or numeric last labels, ports) and
 * phone numbers (signs, hyphens, spaces, dots, parentheses, letters after the digits), with and
 * without 'mailto:' and 'tel:', and the punctuation around them.
 */
function contactTexts(count: number, seed = 23): string[] {
  const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) / 0x80000000;
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)];
  const run = (chars: string, min: number, max: number) => {
    let s = '';
    for (let n = min + Math.floor(rnd() * (max - min + 1)); n > 0; n--) s += pick([...chars]);
    return s;
  };
  const lower = 'abcdefghijklmnopqrstuvwxyz';
  const alnum = lower + 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  // Mostly what addresses look like, sometimes what the parser reads otherwise.
  const seg = () => (rnd() < 0.75 ? run(lower, 1, 8) : rnd() < 0.5 ? run(alnum, 1, 6) : run('0123456789eE', 1, 4));
  const join = () => (rnd() < 0.85 ? pick(['.', '.', '-', '_']) : pick(['..', '+', '.-', '-', '__', '']));
  const parts = (n: number) => {
    let s = seg();
    for (let k = 1; k < n; k++) s += join() + seg();
    return s;
  };
  const tld = () => (rnd() < 0.85 ? pick(['com', 'org', 'net', 'io', 'co', 'uk', 'COM', 'Org']) : pick(['c', 'c1', '1e5', 'x', 'c0m', 'ab-c']));
  const email = () => {
    const local = rnd() < 0.1 ? pick(['', '.x', 'x.', '1abc', '12', 'x+tag', '-x', 'x-']) + parts(1) : parts(1 + Math.floor(rnd() * 3));
    const host = rnd() < 0.1 ? pick(['localhost', '1e5', '123', '-x', 'x-', '_x']) : parts(1 + Math.floor(rnd() * 3));
    const tail = rnd() < 0.85 ? '' : pick(['.', '..', '...', ':80', ':x', '-', '_', '@x.com', '/path', '.x']);
    return `${rnd() < 0.3 ? 'mailto:' : ''}${local}@${host}${rnd() < 0.95 ? '.' + tld() : ''}${tail}`;
  };
  const digits = (min: number, max: number) => run('0123456789', min, max);
  const phone = () => {
    const sign = pick(['+', '+', '+', '-', '', '']);
    const sep = () => (rnd() < 0.7 ? pick(['', '-', ' ']) : pick(['.', '(', ') ', '--', '+', '-+', ' - ', '/']));
    let s = sign + digits(1, 3);
    for (let n = Math.floor(rnd() * 4); n > 0; n--) s += sep() + digits(1, 4);
    if (rnd() < 0.08) s += pick(['e5', 'E', 'ext', 'x12', '.5', '.']);
    return `${rnd() < 0.3 ? 'tel:' : ''}${rnd() < 0.1 ? '(' : ''}${s}`;
  };
  const name = () => pick(['Ann', 'Bob Lee', "O'Brien", 'Zoe Hart-Smith', 'Agent', 'Dr. Mia Chen', 'Customer', 'the', 'R.', 'x']);
  const gap = () => pick([' ', ' ', ' ', ', ', ' (', ') ', '; ', ' <', '> ', '\n', ' | ', PARTY_GAP, ': ', '']);
  const out: string[] = [];
  for (let t = 0; t < count; t++) {
    let s = rnd() < 0.2 ? pick(['', ' ', '(', '"', '-', '+', ':']) : '';
    for (let n = 1 + Math.floor(rnd() * 4); n > 0; n--) {
      const r = rnd();
      s += (r < 0.3 ? name() : r < 0.65 ? email() : phone()) + gap();
    }
    out.push(rnd() < 0.5 ? s.trimEnd() : s);
  }
  return out;
}

describe('the tsvector made in the indexer', () => {
  let t: TestSchema;
  beforeAll(async () => {
    t = await createTestSchema('tsvector');
  });
  afterAll(() => t?.drop());

  /** Teaches a lexicon the words it lacked, from the database's dictionary. */
  async function teach(lexicon: ReturnType<typeof createLexicon>, unknown: Set<string>) {
    const words = [...unknown];
    const rows = await t.sql<{ l: string[] | null }[]>`
      select ts_lexize('english_stem', w) as l from unnest(${words}::text[]) with ordinality as x(w, n) order by n`;
    lexicon.learn(
      words,
      rows.map((r) => r.l),
    );
  }

  /** Texts the fast path takes whose tsvector differs from to_tsvector's (none expected), and how many it took. */
  async function differences(texts: string[], weight: 'A' | 'B' | 'C' | 'D') {
    const lexicon = createLexicon();
    const unknown = new Set<string>();
    for (const x of texts) lexicon.tsvector(x, weight, unknown);
    await teach(lexicon, unknown);
    unknown.clear();
    const made = texts.map((x) => lexicon.tsvector(x, weight, unknown));
    expect(unknown.size).toBe(0);
    // Made here only from plain texts.
    expect(made.filter((m, n) => m !== null && plainTokens(texts[n]) === null)).toEqual([]);
    const taken = made.flatMap((m, n) => (m === null ? [] : [n]));
    // Compared by = and as the bytes sent by COPY (one part joined is the part in binary).
    const bytes = taken.map((n) => Buffer.from(joinTsvectors([made[n]!])!).toString('hex'));
    const diff = await t.sql<{ text: string; made: string; want: string }[]>`
      select x.t as text, x.m::tsvector::text as made, w.tsv::text as want
      from unnest(${taken.map((n) => texts[n])}::text[], ${taken.map((n) => tsvectorText(made[n]!))}::text[], ${bytes}::text[]) as x(t, m, b)
        cross join lateral (select setweight(to_tsvector('english', left(x.t, 200000)), ${weight}::"char") as tsv) w
      where x.m::tsvector is distinct from w.tsv or decode(x.b, 'hex') is distinct from tsvectorsend(w.tsv)`;
    return { diff, taken: taken.length, made };
  }

  /** Services on the schema without their background worker, and an indexer to run rounds with. */
  const indexing = async () => {
    const services = createServices(t.sql, configFor(t.schema));
    await services.stop();
    const { indexer } = createSearch({
      sql: t.sql,
      provider: createEmbeddingProvider(configFor(t.schema)),
      plugins: [],
      log: { info() {}, warn() {} },
    });
    return { services, indexer };
  };

  /** vCons whose stored ranking tsvector is not what the statement before this change made of the stored units. */
  async function changedTsvectors() {
    const GAP = ' . the the the . ';
    return t.sql<{ uuid: string }[]>`
      with old as (
        select su.vcon_uuid,
          setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.idx) filter (where su.source = 'subject'), ''), 200000)), 'A')
          || setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.idx) filter (where su.source = 'party'), ''), 200000)), 'B')
          || setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.idx) filter (where su.source = 'analysis'), ''), 200000)), 'C')
          || setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.source, su.idx) filter (where su.source in ('dialog', 'attachment')), ''), 200000)), 'D') as tsv
        from ${unitRows(t.sql)} su group by su.vcon_uuid
      )
      select old.vcon_uuid::text as uuid from old full join vcon_search vs using (vcon_uuid) where vs.tsv is distinct from old.tsv`;
  }

  test(
    'random texts built from the parser’s special cases: every text made here is to_tsvector’s',
    async () => {
      const texts = fuzzTexts(20000);
      const { diff, taken } = await differences(texts, 'C');
      expect(diff).toEqual([]);
      // The fast path takes a good share and refuses the rest (not vacuous either way).
      expect(taken).toBeGreaterThan(texts.length * 0.2);
      expect(taken).toBeLessThan(texts.length * 0.9);
    },
    FUZZ_TIMEOUT_MS,
  );

  test('real texts: fixtures and the bench corpus, per unit and joined; most are made here', async () => {
    const texts = await realTexts();
    for (const w of ['A', 'D'] as const) {
      const { diff, taken } = await differences(texts, w);
      expect(diff).toEqual([]);
      expect(taken).toBeGreaterThan(texts.length * 0.5);
    }
  });

  test('party texts of the fixtures and the bench corpus: every one made here, as to_tsvector makes it', async () => {
    const { fixtures, bench } = await partyTexts();
    // Addresses and phone numbers are what the party texts are (not vacuous).
    expect(bench.filter((x) => x.includes('@') && x.includes('+')).length).toBeGreaterThan(400);
    expect(fixtures.filter((x) => x.includes('@')).length).toBeGreaterThan(20);
    for (const texts of [fixtures, bench]) {
      const { diff, taken } = await differences(texts, 'B');
      expect(diff).toEqual([]);
      expect(taken).toBe(texts.length);
    }
  });

  test(
    'random e-mail addresses and phone numbers: every text made here is to_tsvector’s',
    async () => {
      const texts = contactTexts(20000);
      const { diff, taken, made } = await differences(texts, 'B');
      expect(diff).toEqual([]);
      // A good share is made here, addresses and signed numbers among them, and the rest refused.
      expect(taken).toBeGreaterThan(texts.length * 0.2);
      expect(taken).toBeLessThan(texts.length * 0.9);
      const madeHere = texts.filter((_, n) => made[n] !== null);
      expect(madeHere.filter((x) => /[A-Z][^ ]*@|@[^ ]*[A-Z]/.test(x)).length).toBeGreaterThan(500);
      expect(madeHere.filter((x) => /[+-]\d+-\d/.test(x)).length).toBeGreaterThan(500);
      expect(madeHere.filter((x) => /mailto:[a-z]/i.test(x)).length).toBeGreaterThan(500);
    },
    FUZZ_TIMEOUT_MS,
  );

  test('a round of bench corpus vCons asks the database for no to_tsvector', async () => {
    const { services, indexer } = await indexing();
    const docs = Array.from({ length: 100 }, (_, i) => generateVcon(13, i));
    await services.vcons.batch(docs, internalCtx);
    const totals: StageTotals = new Map();
    await recordStages(totals, async () => {
      while ((await indexer.indexRound(100)) > 0);
    });
    expect(totals.get('tsvector: make')?.calls).toBeGreaterThan(0);
    expect(totals.has('sql: to_tsvector')).toBe(false);
    expect(await changedTsvectors()).toEqual([]);
  });

  test('texts the parser reads otherwise are refused', () => {
    for (const s of [
      'see https://example.com/x',
      'example.com',
      'e.g. this',
      'version 1.2.3',
      'pay 12.50',
      '3pm',
      'abc123',
      'two-3',
      '10:30',
      'café',
      'x_y',
      '<b>bold</b>',
      'AT&T',
      'a+b',
      'C++',
      'a + b',
      '/usr/bin',
      // Addresses the parser reads otherwise or that are not taken here.
      'x@1e5.com',
      'a@b.c',
      'a@ab.c1',
      'a@localhost',
      'a@example.com:80',
      'a@example.com:x',
      'a@example.com-x',
      '1abc@example.com',
      '12@example.com',
      'a.@example.com',
      'a@b..com',
      'a+tag@example.com',
      '.a@example.com',
      // Numbers the parser reads otherwise or that are not taken here.
      '+1555e5',
      '+1555ext',
      '+1.5',
      '555-2222',
      'x-5',
      '--5',
      '1:+5x',
      'x'.repeat(201),
      // More tokens than a tsvector has positions.
      'x '.repeat(16_001),
    ])
      expect(plainTokens(s), s).toBeNull();
    expect(plainTokens("Don't re-enter the two-factor code, 42 times!")).toEqual([
      'Don',
      't',
      're-enter',
      're',
      'enter',
      'the',
      'two-factor',
      'two',
      'factor',
      'code',
      '42',
      'times',
    ]);
    expect(plainTokens("mailto:Ann.O-Lee_2@Mail.Example.org, tel:+1-555-2222 (-5) Mr. O'Brien bob@x.io.")).toEqual([
      'mailto',
      'Ann.O-Lee_2@Mail.Example.org',
      'tel',
      '+1',
      '-555',
      '-2222',
      '-5',
      'Mr',
      'O',
      'Brien',
      'bob@x.io',
    ]);
  });

  test(
    'four weights joined here and sent in binary by COPY: byte for byte ((A || B) || C) || D of to_tsvector',
    async () => {
      const weights = ['A', 'B', 'C', 'D'] as const;
      // Plain texts (some empty or all stop words), and lexemes repeated across weights past what || keeps.
      const texts = [...fuzzTexts(4000, 7).filter((x) => plainTokens(x)), '', 'the a'];
      const groups = Array.from({ length: 600 }, (_, i) => weights.map((_, k) => texts[(i * 7 + k * 13 + (i >> 3)) % texts.length]));
      groups.push(['kettle '.repeat(60), 'agent', 'kettle '.repeat(200), 'tea'], ['kettle '.repeat(120), '', 'kettle '.repeat(140), 'tea']);
      groups.push(['kettle '.repeat(100), 'tea', 'kettle '.repeat(100), 'tea kettle']);
      // Lexemes sharing their first six characters and more, and prefixes of each other.
      groups.push([
        'internationalization internationally international intern interstate',
        'Intern Internat',
        'understandings understandable understand under undersea',
        'customers customer custom customs customised customary',
      ]);
      // Many lexemes of one six-character prefix, first seen in reverse order (sorted as a long run).
      const prefixed = Array.from({ length: 60 }, (_, i) => `interna${String.fromCharCode(97 + Math.floor(i / 26), 97 + (i % 26))}`);
      groups.push([[...prefixed].reverse().join(' '), 'internal', prefixed.slice(10, 40).join(' '), [...prefixed].reverse().slice(0, 20).join(' ')]);
      // More lexemes than the numeric sort keys index (2,048 over the four weights), half of them in two weights.
      const many = Array.from(
        { length: 1200 },
        (_, i) => `b${String.fromCharCode(97 + (Math.floor(i / 26) % 26), 97 + (i % 26))}${'xyz'[Math.floor(i / 676)]}`,
      );
      groups.push([
        many.slice(0, 600).join(' '),
        many.slice(300, 900).join(' '),
        many.slice(600, 1200).join(' '),
        many.slice(900).concat(many.slice(0, 300)).join(' '),
      ]);
      const lexicon = createLexicon();
      const unknown = new Set<string>();
      for (const g of groups) g.forEach((x, k) => lexicon.tsvector(x, weights[k], unknown));
      await teach(lexicon, unknown);
      const joined = groups.map((g) => {
        const parts = g.map((x, k) => lexicon.tsvector(x, weights[k], new Set()));
        return parts.every((p) => p) ? joinTsvectors(parts as Tsv[]) : null;
      });
      // The capped ones are left to the database; most are joined here.
      expect(joined.slice(-6, -4)).toEqual([null, null]);
      expect(joined.slice(-4).every((j) => j !== null)).toBe(true);
      expect(parseTsvector(joined[joined.length - 1]!).lexemes.length).toBeGreaterThan(1000);
      const taken = joined.flatMap((j, n) => (j ? [n] : []));
      // Sent in the stored order (bytewise, no lexeme twice): the database keeps the entries as sent,
      // so the stored bytes are those || makes (a misordered input is sorted there, its data left as sent).
      const misordered = taken.filter((n) => {
        const l = parseTsvector(joined[n]!).lexemes.map((x) => Buffer.from(x));
        return l.some((x, i) => i > 0 && Buffer.compare(l[i - 1], x) >= 0);
      });
      expect(misordered).toEqual([]);
      expect(taken.length).toBeGreaterThan(groups.length * 0.5);
      await t.sql`create table joined_tsv (n int4, tsv tsvector)`;
      await copyBinary(
        t.sql,
        'joined_tsv',
        [
          ['n', 'int4'],
          ['tsv', 'tsvector'],
        ],
        taken.map((n) => [n, joined[n]!]),
      );
      const col = (k: number) => taken.map((n) => groups[n][k]);
      // Both stored, so both have the header a stored short value gets.
      await t.sql`
      create table want_tsv as
      select x.n, setweight(to_tsvector('english', x.a), 'A') || setweight(to_tsvector('english', x.b), 'B')
          || setweight(to_tsvector('english', x.c), 'C') || setweight(to_tsvector('english', x.d), 'D') as tsv
      from unnest(${taken}::int4[], ${col(0)}::text[], ${col(1)}::text[], ${col(2)}::text[], ${col(3)}::text[]) as x(n, a, b, c, d)`;
      const diff = await t.sql<{ n: number }[]>`
      select n from want_tsv w full join joined_tsv j using (n)
      where tsvectorsend(j.tsv) is distinct from tsvectorsend(w.tsv) or pg_column_size(j.tsv) is distinct from pg_column_size(w.tsv)
        or j.tsv is distinct from w.tsv`;
      expect(diff).toEqual([]);
    },
    FUZZ_TIMEOUT_MS,
  );

  test(
    'random vCons: each weight a random text, made here or by to_tsvector, joined as || joins them',
    async () => {
      const { services, indexer } = await indexing();
      const texts = fuzzTexts(1600, 99);
      const docs = Array.from({ length: 400 }, (_, i) => {
        const [a, b, c, d] = texts.slice(i * 4, i * 4 + 4);
        // Some weights empty or all stop words: a part without positions shifts nothing.
        return buildVcon({
          ...(i % 5 === 1 ? {} : { subject: i % 7 === 2 ? 'the a' : a }),
          parties: [{ name: b }, { name: i % 3 === 0 ? b : 'Agent' }],
          turns: i % 11 === 3 ? [] : [d, c, d],
          analysis: i % 4 === 0 ? [] : [{ type: 'summary', body: c, encoding: 'none' }],
        });
      });
      for (let i = 0; i < docs.length; i += 100) await services.vcons.batch(docs.slice(i, i + 100), internalCtx);
      while ((await indexer.indexRound(100)) > 0);
      expect(await changedTsvectors()).toEqual([]);
    },
    FUZZ_TIMEOUT_MS,
  );

  test('stored rows equal the statement that wrote them before, fast path and to_tsvector mixed', async () => {
    const { services, indexer } = await indexing();
    const docs = [
      ...Array.from({ length: 40 }, (_, i) => generateVcon(11, i)),
      buildVcon({
        subject: 'Re: order #4411 — café visit',
        parties: [{ name: 'Zoë Hart', mailto: 'zoe@example.org' }, { name: 'Agent Pim' }],
        turns: ['See https://example.com/orders/4411 at 10:30 or 3pm.', 'The well-known fix: re-seat the 2.5 mm jack.', 'Fine — thanks!'],
      }),
      buildVcon({ subject: 'Plain words only', turns: ['Nothing special here, only words and 42 numbers.'] }),
      // More positions of one lexeme than tsvector keeps: the database makes this one.
      buildVcon({ subject: 'Kettle kettle', turns: ['kettle '.repeat(150), 'Kettles! '.repeat(150)] }),
      // A lexeme past 256 positions across weights A and C, then D: || drops C's last positions and
      // shifts D by the positions it kept (C and D joined before A and B would shift it further).
      buildVcon({
        subject: 'kettle '.repeat(60),
        parties: [{ name: 'Agent' }],
        analysis: [{ type: 'summary', encoding: 'none', body: 'kettle '.repeat(200) }],
        turns: ['tea'],
      }),
    ];
    await services.vcons.batch(docs, internalCtx);
    while ((await indexer.indexRound(100)) > 0);
    const bad = await changedTsvectors();
    expect(bad).toEqual([]);
    const [n] = await t.sql<
      { n: number }[]
    >`select count(*)::int as n from vcon_search where vcon_uuid = any(${docs.map((d) => d.uuid as string)}::uuid[])`;
    expect(n.n).toBe(docs.length);
    // The words of the to_tsvector texts are found as before.
    const r = await services.search.content({ q: 'example.com' }, internalCtx);
    expect(r.results.map((x) => x.uuid)).toContain(docs[40].uuid);
    const [capped] = await t.sql<{ n: number }[]>`select length(tsv) as n from vcon_search where vcon_uuid = ${docs[42].uuid as string}::uuid`;
    expect(capped.n).toBeGreaterThan(0);
  });

  test('a text whose known words were forgotten while its new ones were learnt goes to to_tsvector, not a null', async () => {
    const { services } = await indexing();
    // A lexicon of two words: learning two new ones starts it afresh and forgets 'kettle'.
    const repo = createSearchIndexRepo(t.sql, createLexicon(2));
    const first = buildVcon({ subject: 'kettle' });
    const second = buildVcon({ subject: 'kettle boiling water' });
    await services.vcons.batch([first, second], internalCtx);
    const rows = (v: Record<string, unknown>) => ({
      uuid: v.uuid as string,
      units: [{ source: 'subject' as const, idx: 0, body: v.subject as string }],
    });
    await repo.writeSearchDocs([rows(first)]);
    await repo.writeSearchDocs([rows(second)]);
    const [r] = await t.sql<{ same: boolean }[]>`
      select tsv = setweight(to_tsvector('english', 'kettle boiling water'), 'A') as same from vcon_search where vcon_uuid = ${second.uuid as string}::uuid`;
    expect(r?.same).toBe(true);
  });

  test('an address with capitals is lower-cased here only as the database lower-cases', () => {
    const lexicon = createLexicon();
    const unknown = new Set<string>();
    expect(lexicon.tsvector('Ann@Example.org ann@example.org', 'B', unknown)).toBeUndefined();
    expect([...unknown]).toEqual([CASE_PROBE]);
    lexicon.learn([CASE_PROBE], [[CASE_PROBE.toLowerCase()]]);
    expect(tsvectorText(lexicon.tsvector('Ann@Example.org ann@example.org', 'B', new Set())!)).toBe("'ann@example.org':1B,2B");
    // A database that lower-cases otherwise (a Turkish locale's 'I'): to_tsvector makes those.
    const turkish = createLexicon();
    turkish.learn([CASE_PROBE], [['abcdefghıjklmnopqrstuvwxyz']]);
    expect(turkish.tsvector('Ann@Example.org', 'B', new Set())).toBeNull();
    expect(tsvectorText(turkish.tsvector('ann@example.org +1', 'B', new Set())!)).toBe("'ann@example.org':1B '+1':2B");
  });

  test("each text's positions are its own: none carry over from a text refused or made before", () => {
    const lexicon = createLexicon();
    const unknown = new Set<string>();
    lexicon.tsvector('kettle tea water', 'D', unknown);
    lexicon.learn([...unknown], [['kettl'], ['tea'], ['water']]);
    // Over the positions bound (the database makes that one), and within it.
    expect(lexicon.tsvector('kettle '.repeat(250), 'D', new Set())).toBeNull();
    expect(tsvectorText(lexicon.tsvector('kettle '.repeat(150) + 'tea water', 'D', new Set())!)).toMatch(/^kettl:1,2,.*,150 tea:151 water:152$/);
    expect(tsvectorText(lexicon.tsvector('kettle tea tea', 'C', new Set())!)).toBe('kettl:1C tea:2C,3C');
    // Stopped by a word it does not know yet, after known ones: the next text starts clean.
    expect(lexicon.tsvector('tea kettle tea teapot', 'A', new Set())).toBeUndefined();
    expect(tsvectorText(lexicon.tsvector('water tea', 'A', new Set())!)).toBe('water:1A tea:2A');
  });

  test('a text of as many tokens as are made here (16,000), and one more', () => {
    const lexicon = createLexicon();
    // The 676 two-letter words, each its own lexeme, over and over: 16,000 tokens in 48,000
    // characters (within the text bound), no lexeme past its 200 positions.
    const words = Array.from({ length: 676 }, (_, i) => String.fromCharCode(97 + Math.floor(i / 26), 97 + (i % 26)));
    lexicon.learn(
      words,
      words.map((w) => [w]),
    );
    const tokens = Array.from({ length: 16_000 }, (_, i) => words[i % 676]);
    const t = lexicon.tsvector(tokens.join(' '), 'D', new Set())!;
    expect(t.lexemes).toEqual(words);
    expect(t.start[676]).toBe(16_000);
    expect([...positionsOf(t, 0)]).toEqual(Array.from({ length: 24 }, (_, k) => 1 + 676 * k));
    expect([...positionsOf(t, 675)]).toEqual(Array.from({ length: 23 }, (_, k) => 676 + 676 * k));
    // One token more: to_tsvector makes it.
    expect(lexicon.tsvector(`${tokens.join(' ')} aa`, 'D', new Set())).toBeNull();
  });
});
