// A deterministic, realistic corpus: customer-service conversations of 3 to 10 KB each, with
// parties, text dialogs, a transcript and a summary analysis, and a tags attachment. vCon i is a
// pure function of (seed, i), so any slice can be generated without the ones before it.

/** mulberry32: a small, fast, seedable PRNG (uniform in [0, 1)). */
export function createRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(rnd: () => number, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
const int = (rnd: () => number, lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));

/** A v4-shaped UUID drawn from the PRNG (deterministic, unlike crypto.randomUUID). */
export function uuidFrom(rnd: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(rnd() * 16).toString(16));
  hex[12] = '4';
  hex[16] = '89ab'[Math.floor(rnd() * 4)];
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const FIRST = [
  'Ana',
  'Ben',
  'Chloe',
  'David',
  'Elena',
  'Farid',
  'Grace',
  'Hiro',
  'Ines',
  'Jonas',
  'Kara',
  'Liam',
  'Maya',
  'Noah',
  'Olga',
  'Pablo',
  'Quinn',
  'Rosa',
  'Sami',
  'Tara',
  'Uma',
  'Victor',
  'Wen',
  'Yusuf',
  'Zoe',
];
const LAST = [
  'Alvarez',
  'Brown',
  'Chen',
  'Dubois',
  'Eriksen',
  'Fischer',
  'Garcia',
  'Haddad',
  'Ivanova',
  'Jensen',
  'Kim',
  'Lopez',
  'Moreau',
  'Nakamura',
  'Okafor',
  'Patel',
  'Rossi',
  'Silva',
  'Tanaka',
  'Weber',
];
const DOMAINS = ['example.com', 'mail.example.org', 'corp.example.net', 'inbox.example.io'];

interface Topic {
  key: string;
  subject: string[];
  customer: string[];
  agent: string[];
  summary: string;
}

const TOPICS: Topic[] = [
  {
    key: 'billing',
    subject: ['Double charge on my card', 'Invoice shows the wrong amount', 'Question about my latest bill'],
    customer: [
      'I was charged twice for the same order and I would like the duplicate payment refunded.',
      'My invoice shows a total that does not match the price on the website.',
      'Can you explain the extra fee on my latest statement?',
      'The charge appeared on my credit card two days ago and again this morning.',
    ],
    agent: [
      'I can see two identical charges on your account; I have started a refund for the duplicate.',
      'The difference comes from the regional tax that was added at checkout.',
      'The refund usually reaches your card within three to five business days.',
      'I have attached a corrected invoice to this conversation.',
    ],
    summary: 'Customer reported a duplicate charge; agent confirmed it and issued a refund of the second payment.',
  },
  {
    key: 'shipping',
    subject: ['Where is my parcel?', 'Package marked delivered but not received', 'Delivery delayed again'],
    customer: [
      'My package was supposed to arrive on Monday and the tracking number has not updated since.',
      'The courier says it was delivered but there is nothing at my door.',
      'Could you send the replacement by express shipping this time?',
      'I have been waiting for the delivery for more than a week now.',
    ],
    agent: [
      'The carrier reports a delay at the regional sorting centre; the parcel should move tomorrow.',
      'I have opened an investigation with the courier and will reship the order if it is lost.',
      'Here is the new tracking number for the replacement shipment.',
      'I upgraded the delivery to express at no extra cost.',
    ],
    summary: 'Parcel delayed in transit; agent opened a carrier investigation and offered a free express reshipment.',
  },
  {
    key: 'account',
    subject: ['Cannot log in to my account', 'Password reset email never arrives', 'Locked out after too many attempts'],
    customer: [
      'I cannot sign in; the site says my password is wrong even after I reset it.',
      'The password reset email never arrives, I checked the spam folder too.',
      'My account got locked after several failed login attempts.',
      'I changed my phone and the two-factor code no longer works.',
    ],
    agent: [
      'I have unlocked your account; please try signing in again in a few minutes.',
      'The reset link was sent to an old email address; I updated it for you.',
      'For security I need to verify the last four digits of the card on file.',
      'I disabled two-factor authentication so you can enrol your new phone.',
    ],
    summary: 'Customer was locked out; agent verified identity, unlocked the account and reset two-factor authentication.',
  },
  {
    key: 'returns',
    subject: ['Return a damaged item', 'Item arrived broken', 'How do I return this order?'],
    customer: [
      'The blender arrived with a cracked jar and I would like to return it.',
      'The item is damaged and I want my money back rather than a replacement.',
      'Do I need to pay for the return label?',
      'The box was crushed and the screen is scratched.',
    ],
    agent: [
      'I am sorry it arrived broken; I have emailed you a prepaid return label.',
      'Once the warehouse receives the item we will reimburse the full amount.',
      'You do not need to send photos, the return is already approved.',
      'Alternatively I can ship a replacement today if you prefer.',
    ],
    summary: 'Damaged item returned with a prepaid label; full reimbursement on receipt at the warehouse.',
  },
  {
    key: 'subscription',
    subject: ['Cancel my subscription', 'Upgrade to the annual plan', 'Subscription renewed without notice'],
    customer: [
      'Please cancel my subscription before the next renewal date.',
      'I would like to switch from the monthly plan to the annual plan.',
      'My subscription renewed automatically and I did not get a reminder.',
      'Is there a discount if I stay for another year?',
    ],
    agent: [
      'Your subscription is cancelled and will remain active until the end of the period.',
      'I moved you to the annual plan and prorated the remaining month.',
      'I can offer twenty percent off the next year as a loyalty discount.',
      'Renewal reminders are now enabled on your account.',
    ],
    summary: 'Customer asked about the subscription plan; agent changed the plan and applied a loyalty discount.',
  },
  {
    key: 'technical',
    subject: ['App crashes on startup', 'Router keeps dropping the connection', 'Error code 504 in the dashboard'],
    customer: [
      'The mobile app crashes every time I open it since the last update.',
      'My router drops the wifi connection several times an hour.',
      'The dashboard shows error code 504 when I export reports.',
      'I already tried restarting the device and reinstalling the app.',
    ],
    agent: [
      'This is a known issue with the latest version; a fix ships this week.',
      'Please update the router firmware from the settings page and reboot it.',
      'The export times out on large reports; try a shorter date range for now.',
      'I escalated the ticket to our engineering team with your logs.',
    ],
    summary: 'Technical fault reported after an update; agent gave a workaround and escalated to engineering.',
  },
];

const FILLER = [
  'Thank you for your patience while I look into this.',
  'Could you confirm the order number for me please?',
  'Sure, it is the one from last Tuesday.',
  'Let me check that on my side, it will only take a moment.',
  'I understand how frustrating this must be.',
  'Is there anything else I can help you with today?',
  'No, that is everything, thanks for your help.',
  'You are welcome, have a great day.',
  'I appreciate you explaining it so clearly.',
  'Just to be sure, the email on the account ends with the same domain?',
];

const TAG_VALUES: Record<string, readonly string[]> = {
  priority: ['low', 'normal', 'high', 'urgent'],
  channel: ['chat', 'email', 'sms'],
  region: ['emea', 'amer', 'apac'],
  sentiment: ['positive', 'neutral', 'negative'],
};

export const TOPIC_KEYS = TOPICS.map((t) => t.key);
export const TAG_KEYS = Object.keys(TAG_VALUES);
export const tagValues = (key: string) => TAG_VALUES[key] ?? [];

/** The vCon at position i of the corpus of `seed`. */
export function generateVcon(seed: number, i: number): Record<string, unknown> {
  const rnd = createRandom((seed * 2654435761 + i * 40503) >>> 0);
  const topic = pick(rnd, TOPICS);
  const customerName = `${pick(rnd, FIRST)} ${pick(rnd, LAST)}`;
  const agentName = `${pick(rnd, FIRST)} ${pick(rnd, LAST)}`;
  const mail = (n: string) => `${n.toLowerCase().replace(' ', '.')}@${pick(rnd, DOMAINS)}`;
  const created = new Date(Date.UTC(2024, 0, 1) + Math.floor(rnd() * 365 * 86400) * 1000 + i);
  const turns = int(rnd, 9, 26);
  const dialog: Record<string, unknown>[] = [];
  const transcript: string[] = [];
  let t = created.getTime();
  for (let d = 0; d < turns; d++) {
    const fromCustomer = d % 2 === 0;
    const sentences = int(rnd, 1, 2);
    const parts: string[] = [];
    for (let s = 0; s < sentences; s++) {
      parts.push(rnd() < 0.6 ? pick(rnd, fromCustomer ? topic.customer : topic.agent) : pick(rnd, FILLER));
    }
    const body = parts.join(' ');
    t += int(rnd, 5, 120) * 1000;
    dialog.push({
      type: 'text',
      start: new Date(t).toISOString(),
      parties: fromCustomer ? [0, 1] : [1, 0],
      originator: fromCustomer ? 0 : 1,
      mediatype: 'text/plain',
      encoding: 'none',
      body,
    });
    transcript.push(`${fromCustomer ? customerName : agentName}: ${body}`);
  }
  const tags = TAG_KEYS.map((k) => `${k}:${pick(rnd, TAG_VALUES[k])}`).concat(`topic:${topic.key}`);
  const channel = tags.find((x) => x.startsWith('channel:'))!.slice('channel:'.length);
  return {
    vcon: '0.0.1',
    uuid: uuidFrom(rnd),
    created_at: created.toISOString(),
    subject: `${pick(rnd, topic.subject)} (#${100000 + i})`,
    parties: [
      { tel: `+1555${String(int(rnd, 0, 9999999)).padStart(7, '0')}`, name: customerName, mailto: mail(customerName), role: 'customer' },
      { name: agentName, mailto: mail(agentName), role: 'agent' },
    ],
    dialog,
    analysis: [
      {
        type: 'transcript',
        dialog: dialog.map((_, k) => k),
        vendor: 'bench',
        product: 'transcriber',
        schema: 'text',
        encoding: 'none',
        body: transcript.join('\n'),
      },
      {
        type: 'summary',
        dialog: [0],
        vendor: 'bench',
        product: 'summariser',
        schema: 'text',
        encoding: 'none',
        body: `${topic.summary} Contact via ${channel}.`,
      },
    ],
    attachments: [{ purpose: 'tags', encoding: 'json', body: tags }],
  };
}

/** Keyword, paraphrase and mixed queries over the corpus vocabulary (for the search figures). */
export const SEARCH_QUERIES = [
  'refund',
  'duplicate charge',
  '"tracking number"',
  'password reset email',
  'cancel subscription',
  'router firmware',
  'invoice OR receipt',
  'return label -replacement',
  'error code 504',
  'two-factor',
  'money back for a broken product',
  'my parcel never showed up',
  'I cannot get into my account',
  'the application keeps closing',
  'stop my monthly plan',
  'loyalty discount for staying another year',
  'courier lost the package',
  'charged two times',
  'wifi keeps disconnecting',
  'reimbursement after the warehouse receives it',
];

/**
 * Queries for the kept corpus, which the search bench's generator builds (its vocabulary: refunds,
 * logins, parcels, billing, internet, subscriptions, claims, appointments, fraud, repairs). Used
 * when that module does not export its own query set.
 */
export const SEARCH_BENCH_QUERIES = [
  'refund',
  'blender refund',
  'password reset',
  '"double charge"',
  'parcel lost courier',
  'router firmware',
  'cancel subscription',
  'water damage claim',
  'warranty repair laptop',
  'card blocked -dispute',
  'money returned for a broken kitchen appliance',
  'I cannot sign in',
  'my package never came',
  'charged two times',
  'internet keeps dropping',
  'stop my membership renewal',
  'someone crashed into my car',
  'fraudulent purchases abroad',
  'refnud',
  'technician visit OR adjuster',
];
