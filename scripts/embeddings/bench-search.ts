// Speed of the three searches through HTTP on a generated corpus of realistic vCons in one group
// (npm run bench:search; `--quick` for a small corpus). Callable as runSearchBench() by the
// benchmark suite. The corpus is built through the service (validation, derived rows, embeddings
// in the write transaction) and kept between runs in its schema, so a rerun only measures.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { loadConfig, parseConfig } from '../../src/config.js';
import { createSql } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';
import { acquireEmbeddedPostgres } from '../../src/db/embedded.js';
import { createServices, startInstance } from '../../src/main.js';
import { internalCtx } from '../../src/services/context.js';
import { createLogger } from '../../src/logger.js';
import { reembedGroup } from '../../src/search.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { isMain } from './util.js';

export interface SearchBenchOptions {
  /** Small corpus and few requests: a smoke run of the bench itself. */
  quick?: boolean;
  /** vCons in the corpus (default 100,000; quick 5,000). */
  size?: number;
  /** Requests per search kind (default 300; quick 60). */
  requests?: number;
  schema?: string;
  databaseUrl?: string;
  log?: (line: string) => void;
}

export interface SearchBenchResult {
  corpus: { vcons: number; units: number; built: number; build_s: number | null; rate_per_s: number | null };
  searches: Record<'content' | 'semantic' | 'hybrid', { requests: number; p50_ms: number; p95_ms: number; max_ms: number; mean_results: number }>;
  rss_mb: number;
}

// A small world of customer-service conversations: topics with their own vocabulary, mixed
// with products, names and numbers so that terms have realistic, uneven frequencies.
const TOPICS: { subject: string[]; customer: string[]; agent: string[]; summary: string }[] = [
  {
    subject: ['Refund request', 'Return for refund', 'Money back'],
    customer: ['The {product} I ordered arrived broken and does not work.', 'I want to return the {product}, it stopped working after {n} days.'],
    agent: ['I have issued a refund of {amount} dollars to your card.', 'Please send the {product} back with the prepaid label; the refund follows.'],
    summary: 'Customer received a defective {product} and was refunded {amount} dollars.',
  },
  {
    subject: ['Password reset', 'Account locked', 'Login problem'],
    customer: ['I cannot log in to my account, it says my password is wrong.', 'My account got locked after several attempts.'],
    agent: ['I sent a password reset link to {email}.', 'The account is unlocked; please choose a new password.'],
    summary: 'Customer was locked out and received a password reset link.',
  },
  {
    subject: ['Late delivery', 'Where is my order', 'Missing parcel'],
    customer: [
      'My order {order} has not arrived, the tracking has not changed in {n} days.',
      'The courier says delivered but I never got the parcel.',
    ],
    agent: ['The carrier lost the parcel; a replacement ships today by express.', 'I opened an investigation with the courier for order {order}.'],
    summary: 'Delivery of order {order} was delayed; a replacement was shipped.',
  },
  {
    subject: ['Billing error', 'Double charge', 'Wrong invoice'],
    customer: ['I was charged twice for invoice {order}.', 'My bill shows {amount} dollars but my plan costs less.'],
    agent: ['The duplicate charge of {amount} dollars has been reversed.', 'I corrected the invoice and credited the difference.'],
    summary: 'Customer was billed twice; the duplicate payment was reversed.',
  },
  {
    subject: ['Internet outage', 'Slow connection', 'Wifi drops'],
    customer: ['The internet keeps disconnecting every evening.', 'My broadband speed is far below what I pay for.'],
    agent: ['I rebooted your router remotely and pushed a firmware update.', 'A technician will check the line on {day}.'],
    summary: 'Unstable internet connection; router reset and technician visit scheduled.',
  },
  {
    subject: ['Cancel subscription', 'End membership', 'Stop renewal'],
    customer: ['Please cancel my subscription, I am moving abroad.', 'I do not want the membership to renew next month.'],
    agent: ['Your subscription is cancelled and will not renew.', 'Done, you keep access until the end of the billing period.'],
    summary: 'Customer cancelled the subscription effective at the end of the period.',
  },
  {
    subject: ['Insurance claim', 'Car accident', 'Water damage'],
    customer: ['Someone hit my car in the parking lot on {day}.', 'A pipe burst and flooded the kitchen floor.'],
    agent: ['I opened claim {order}; an adjuster will call you.', 'Water damage is covered; a plumber is on the way.'],
    summary: 'A claim was opened and an adjuster assigned.',
  },
  {
    subject: ['Appointment booking', 'Reschedule visit', 'Doctor appointment'],
    customer: ['I need an appointment with a doctor about back pain.', 'Can I move my appointment from {day} to next week?'],
    agent: ['You are booked with Dr. {name} on {day} at nine.', 'Your visit has been moved to next {day}.'],
    summary: 'Appointment booked with Dr. {name}.',
  },
  {
    subject: ['Card stolen', 'Fraud alert', 'Unknown transactions'],
    customer: ['My wallet was stolen with my credit card.', 'I see purchases from another country I did not make.'],
    agent: ['The card is blocked and a new one is in the mail.', 'I froze the card and started a dispute for {amount} dollars.'],
    summary: 'Card blocked after suspected fraud; dispute opened.',
  },
  {
    subject: ['Warranty repair', 'Device not charging', 'Screen cracked'],
    customer: ['My {product} no longer charges.', 'I dropped the {product} and the screen cracked.'],
    agent: ['The {product} is under warranty; bring it to a store for a free repair.', 'Accidental damage is covered by your protection plan.'],
    summary: 'Warranty repair of a {product} arranged.',
  },
];
const PRODUCTS = [
  'blender',
  'toaster',
  'laptop',
  'phone',
  'headphones',
  'coffee machine',
  'vacuum cleaner',
  'television',
  'washing machine',
  'printer',
  'router',
  'tablet',
  'camera',
  'microwave',
  'kettle',
  'monitor',
  'keyboard',
  'smartwatch',
  'speaker',
  'dishwasher',
];
const FIRST = [
  'Alice',
  'Bruno',
  'Chen',
  'Dana',
  'Elif',
  'Farid',
  'Grace',
  'Hiro',
  'Ines',
  'Jamal',
  'Kara',
  'Luis',
  'Maya',
  'Nils',
  'Olga',
  'Priya',
  'Quinn',
  'Rosa',
  'Sami',
  'Tomas',
];
const LAST = [
  'Anders',
  'Baker',
  'Costa',
  'Dubois',
  'Evans',
  'Fischer',
  'Garcia',
  'Haddad',
  'Ivanov',
  'Jensen',
  'Kowalski',
  'Lopez',
  'Moreau',
  'Novak',
  'Okafor',
  'Patel',
  'Rossi',
  'Silva',
  'Tanaka',
  'Weber',
];
const DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const FILLER = [
  'Thank you for waiting.',
  'Let me check that for you.',
  'Is there anything else I can help with?',
  'I understand, that is frustrating.',
  'Could you confirm your postcode?',
  'Thanks, that is all for today.',
  'One moment please while I look at your account.',
];

/** A deterministic pseudo-random generator, so every corpus of a size is the same. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One realistic vCon (~2–5 KB): a call (recording, transcript) or a chat (text turns), a summary, tags. */
export function generateVcon(i: number): Record<string, unknown> {
  const r = rng(i + 1);
  const pick = <T>(a: T[]) => a[Math.floor(r() * a.length)];
  const topic = pick(TOPICS);
  const product = pick(PRODUCTS);
  const name = `${pick(FIRST)} ${pick(LAST)}`;
  const agent = `${pick(FIRST)} ${pick(LAST)}`;
  const email = `${name.toLowerCase().replace(' ', '.')}${i % 97}@example.com`;
  const fill = (s: string) =>
    s
      .replace(/\{product\}/g, product)
      .replace(/\{n\}/g, String(2 + Math.floor(r() * 20)))
      .replace(/\{amount\}/g, String(10 + Math.floor(r() * 900)))
      .replace(/\{email\}/g, email)
      .replace(/\{order\}/g, `A${100000 + Math.floor(r() * 900000)}`)
      .replace(/\{day\}/g, pick(DAYS))
      .replace(/\{name\}/g, pick(LAST));
  const created = new Date(Date.UTC(2024, 0, 1) + Math.floor(r() * 600 * 86_400_000)).toISOString();
  const turns: string[] = [];
  const n = 4 + Math.floor(r() * 6);
  for (let t = 0; t < n; t++) {
    const own = t % 2 === 0 ? topic.customer : topic.agent;
    turns.push(fill(r() < 0.6 ? pick(own) : pick(FILLER)));
  }
  const transcript = turns.map((t, k) => `${k % 2 === 0 ? name : agent}: ${t}`).join('\n');
  // Calls carry a recording and its transcript; chats carry their turns as text dialogs.
  const call = r() < 0.6;
  const duration = 60 + Math.floor(r() * 900);
  return {
    vcon: '0.3.0',
    uuid: randomUUID(),
    created_at: created,
    subject: `${pick(topic.subject)} - ${product}`,
    parties: [
      { name, mailto: email, tel: `+1555${String(1_000_000 + i).slice(-7)}` },
      { name: agent, role: 'agent' },
    ],
    dialog: call
      ? [{ type: 'recording', start: created, parties: [0, 1], duration, mediatype: 'audio/x-wav', url: `https://media.example.com/calls/${i}.wav` }]
      : turns.map((body, k) => ({
          type: 'text',
          start: created,
          parties: [k % 2],
          originator: k % 2,
          mediatype: 'text/plain',
          encoding: 'none',
          body,
        })),
    analysis: [
      ...(call ? [{ type: 'transcript', vendor: 'bench', dialog: 0, encoding: 'json', body: JSON.stringify({ transcript, confidence: 0.9 }) }] : []),
      { type: 'summary', vendor: 'bench', dialog: 0, encoding: 'none', body: fill(topic.summary) },
    ],
    attachments: [
      {
        purpose: 'tags',
        encoding: 'json',
        body: [`topic:${topic.subject[0].toLowerCase().replace(/ /g, '_')}`, `priority:${pick(['low', 'normal', 'high'])}`],
      },
    ],
  };
}

/** Queries a support team types: single terms, phrases, paraphrases, a few typos. */
const QUERIES = [
  'refund',
  'blender refund',
  'password reset',
  'account locked',
  'parcel lost courier',
  '"double charge"',
  'router firmware',
  'cancel subscription',
  'water damage claim',
  'credit card stolen',
  'warranty repair laptop',
  'screen cracked phone',
  'appointment back pain',
  'invoice corrected',
  'money returned for a broken kitchen appliance',
  'I cannot sign in',
  'my package never came',
  'charged two times',
  'internet keeps dropping',
  'stop my membership renewal',
  'someone crashed into my car',
  'fraudulent purchases abroad',
  'free repair under guarantee',
  'book a visit with a physician',
  'refnud',
  'pasword',
  'subscripton cancel',
  'dishwasher',
  'smartwatch not charging',
  'Kowalski',
  'express replacement',
  'technician visit',
];

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

export async function runSearchBench(opts: SearchBenchOptions = {}): Promise<SearchBenchResult> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const size = opts.size ?? (opts.quick ? 5_000 : 100_000);
  const requests = opts.requests ?? (opts.quick ? 60 : 300);
  const schema = opts.schema ?? (opts.quick ? 'bench_search_quick2' : 'bench_search2');
  const base = loadConfig();
  const embedded = (opts.databaseUrl ?? base.db.url) ? undefined : await acquireEmbeddedPostgres(path.join(base.dataDir, 'embedded'));
  const url = opts.databaseUrl ?? base.db.url ?? embedded!.url;
  const env = {
    DATABASE_URL: url,
    SUPABASE_DB_SCHEMA: schema,
    LOG_LEVEL: 'warn',
    MCP_TRANSPORT: 'http',
    MCP_HTTP_PORT: '0',
    API_KEYS: 'bench-key',
    API_KEYS_READONLY: 'bench-ro',
    VCON_DATA_DIR: base.dataDir,
  };
  const config = parseConfig(env);
  const sql = createSql({ url, schema, max: 4 });
  try {
    await migrate(sql, schema);
    const [{ n: existing }] = await sql<{ n: number }[]>`select count(*)::int as n from vcons`;
    let build_s: number | null = null;
    let built = 0;
    if (existing < size) {
      const services = createServices(sql, config);
      const t0 = Date.now();
      const BATCH = 100;
      const CONCURRENCY = 3;
      let next = existing;
      const worker = async () => {
        for (;;) {
          const start = next;
          if (start >= size) return;
          next = Math.min(size, start + BATCH);
          const docs = Array.from({ length: next - start }, (_, k) => generateVcon(start + k));
          const r = await services.vcons.batch(docs, internalCtx);
          if (r.failed) throw new Error(`corpus batch failed: ${JSON.stringify(r.results.find((x) => x.status === 400))}`);
          built += docs.length;
          if (built % 5000 < BATCH) log(`corpus: ${existing + built}/${size} (${Math.round(built / ((Date.now() - t0) / 1000))}/s)`);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      // Indexing is asynchronous (the index queue): measure once every vCon is searchable.
      for (;;) {
        const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from index_queue where last_error is null`;
        if (n === 0) break;
        log(`corpus: ${n} vCons still to index`);
        await new Promise((r) => setTimeout(r, 5000));
      }
      build_s = (Date.now() - t0) / 1000;
      // Measure steady state: set hint bits and the visibility map the way autovacuum would.
      await sql`vacuum analyze vcons, search_units, vcon_search, vcon_codes, vcon_vectors, search_vectors, vcon_tags`;
    } else {
      // A kept corpus embedded under another model id (e.g. before a MODEL_VERSION bump) is
      // re-embedded first: semantic search would otherwise measure an empty vector space.
      const re = await reembedGroup(sql, createEmbeddingProvider(config));
      if (re.embedded > 0) {
        log(`corpus: re-embedded ${re.embedded} vCons into ${re.model} (${Math.round(re.ms / 1000)} s)`);
        await sql`vacuum analyze vcon_codes, vcon_vectors, search_vectors`;
      }
    }
    const [{ vcons, units }] = await sql<{ vcons: number; units: number }[]>`
      select (select count(*)::int from vcons) as vcons, (select coalesce(sum(json_array_length(units)), 0)::int from search_units) as units`;

    const instance = await startInstance(config, { log: createLogger({ ...config, logLevel: 'warn' }) });
    const searches = {} as SearchBenchResult['searches'];
    try {
      const api = `${instance.url}${config.rest.basePath}`;
      const headers = { authorization: 'Bearer bench-ro' };
      for (const kind of ['content', 'semantic', 'hybrid'] as const) {
        // Warm-up: plans, caches, the word vectors.
        for (const q of QUERIES.slice(0, 5)) await fetch(`${api}/vcons/search/${kind}?q=${encodeURIComponent(q)}`, { headers }).then((r) => r.text());
        const times: number[] = [];
        let results = 0;
        for (let i = 0; i < requests; i++) {
          const q = QUERIES[i % QUERIES.length];
          const filter =
            i % 5 === 4 ? '&start_date=2024-06-01&end_date=2024-12-31' : i % 7 === 6 ? `&tags=${encodeURIComponent('{"priority":"high"}')}` : '';
          const t = performance.now();
          const res = await fetch(`${api}/vcons/search/${kind}?q=${encodeURIComponent(q)}&limit=10${filter}`, { headers });
          const body = (await res.json()) as { results?: unknown[] };
          times.push(performance.now() - t);
          if (res.status !== 200) throw new Error(`${kind} ${q}: HTTP ${res.status} ${JSON.stringify(body)}`);
          results += body.results?.length ?? 0;
        }
        times.sort((a, b) => a - b);
        searches[kind] = {
          requests,
          p50_ms: +percentile(times, 50).toFixed(1),
          p95_ms: +percentile(times, 95).toFixed(1),
          max_ms: +times[times.length - 1].toFixed(1),
          mean_results: +(results / requests).toFixed(1),
        };
        log(`${kind}: p50 ${searches[kind].p50_ms} ms, p95 ${searches[kind].p95_ms} ms`);
      }
    } finally {
      await instance.stop();
    }
    return {
      corpus: { vcons, units, built, build_s, rate_per_s: build_s ? Math.round(built / build_s) : null },
      searches,
      rss_mb: Math.round(process.memoryUsage().rss / 1e6),
    };
  } finally {
    await sql.end({ timeout: 5 });
    await embedded?.release();
  }
}

if (isMain(import.meta.url)) {
  runSearchBench({ quick: process.argv.includes('--quick') }).then(
    (r) => process.stdout.write(`${JSON.stringify(r, null, 2)}\n`),
    (err: Error) => {
      process.stderr.write(`bench:search failed: ${err.stack ?? err.message}\n`);
      process.exitCode = 1;
    },
  );
}
