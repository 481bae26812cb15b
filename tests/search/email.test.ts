// Email vCons: what a person reads in a message/rfc822 body (or a base64url-encoded
// text or email body) is found by keyword, semantic and hybrid search, over REST and MCP, and
// snippets show decoded text.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { decodeBodies, extractUnits } from '../../src/search/units.js';
import { emailText, MAX_EMAIL_PARTS } from '../../src/search/email.js';
import { startTestServer, KEY, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';
import { buildVcon } from './builders.js';

const crlf = (lines: string[]) => lines.join('\r\n');

/** multipart/alternative, quoted-printable plain part with a soft break, an encoded-word subject, a folded To. */
const ALTERNATIVE = crlf([
  'From: "Ana Lopez" <ana.lopez@example.com>',
  'To: Billing Team',
  ' <billing@shop.example>',
  'Subject: =?UTF-8?Q?Charged_twice_for_my_phone_bill?=',
  'MIME-Version: 1.0',
  'Content-Type: multipart/alternative; boundary="alt-1"',
  '',
  '--alt-1',
  'Content-Type: text/plain; charset=utf-8',
  'Content-Transfer-Encoding: quoted-printable',
  '',
  'Hello, my card was debited twice =E2=80=94 the second payment for the wolfr=',
  'amite plan should be refunded.',
  '--alt-1',
  'Content-Type: text/html; charset=utf-8',
  '',
  '<p>Hello, my card was debited twice for the <b>wolframite</b> plan.</p>',
  '--alt-1--',
  '',
]);

/** HTML only, base64 transfer encoding, with an attachment whose content must not be indexed. */
const HTML_ONLY = crlf([
  'From: Ben Okafor <ben@example.net>',
  'To: support@shop.example',
  'Subject: Parcel update',
  'MIME-Version: 1.0',
  'Content-Type: multipart/mixed; boundary=mix',
  '',
  '--mix',
  'Content-Type: text/html; charset=utf-8',
  'Content-Transfer-Encoding: base64',
  '',
  Buffer.from(
    '<html><head><style>p{color:red}</style></head><body><p>The courier left my <b>terrarium</b> in the rain&nbsp;again.</p><script>var zanzibar=1</script></body></html>',
  ).toString('base64'),
  '--mix',
  'Content-Type: application/pdf; name="receipt-4471.pdf"',
  'Content-Disposition: attachment; filename="receipt-4471.pdf"',
  'Content-Transfer-Encoding: base64',
  '',
  Buffer.from('%PDF-1.4 quetzalcoatl').toString('base64'),
  '--mix--',
  '',
]);

/** A forwarded thread: the original message attached inline as message/rfc822. */
const FORWARDED = crlf([
  'From: Carla Nunes <carla@example.org>',
  'To: Returns <returns@shop.example>',
  'Subject: Fwd: kettle lid',
  'Content-Type: multipart/mixed; boundary="fwd"',
  '',
  '--fwd',
  'Content-Type: text/plain',
  '',
  'Forwarding what my husband wrote, please help.',
  '--fwd',
  'Content-Type: message/rfc822',
  '',
  'From: Duarte Nunes <duarte@example.org>',
  'Subject: kettle lid',
  '',
  'The hinge of the kettle lid snapped after a week; the gooseneck spout leaks too.',
  '--fwd--',
  '',
]);

/** A malformed header block: a header without a colon, an unparsable From, no blank line issues. */
const MALFORMED = crlf([
  'From: <<<not an address',
  'Subject',
  'To: ,,,',
  'X-Broken',
  '',
  'My thermostat keeps showing the error ocelot-77 every morning.',
]);

/** A plain email sent as text/plain (headers and all). */
const PLAIN_EMAIL = crlf(['From: Dee <dee@example.com>', 'Subject: Gym membership', '', 'Please cancel my marzipan gym membership from next month.']);

const emailDialog = (body: string, extra: Record<string, unknown> = {}) => ({
  type: 'text',
  start: '2025-03-14T15:10:00Z',
  parties: [0],
  mediatype: 'message/rfc822',
  encoding: 'none',
  body,
  ...extra,
});

describe('emailText', () => {
  test('multipart/alternative: the quoted-printable plain part, decoded subject and names, no headers', async () => {
    const t = await emailText(ALTERNATIVE);
    expect(t).toContain('Charged twice for my phone bill');
    expect(t).toContain('Ana Lopez');
    expect(t).toContain('Billing Team');
    expect(t).toContain('debited twice — the second payment for the wolframite plan');
    expect(t).not.toMatch(/Content-Type|quoted-printable|=E2|<p>|alt-1/);
    // text/plain is preferred: the HTML alternative is not added beside it.
    expect(t.match(/debited twice/g)).toHaveLength(1);
  });

  test('HTML only: reduced to text (no markup, style or script); attachments by file name only', async () => {
    const t = await emailText(HTML_ONLY);
    expect(t).toContain('The courier left my terrarium in the rain');
    expect(t).toContain('receipt-4471.pdf');
    expect(t).not.toMatch(/<|color:red|zanzibar|quetzalcoatl|&nbsp;/);
  });

  test('a forwarded thread keeps the forwarded message text', async () => {
    const t = await emailText(FORWARDED);
    expect(t).toContain('Forwarding what my husband wrote');
    expect(t).toContain('gooseneck spout leaks');
  });

  test('a malformed header block still yields the body', async () => {
    const t = await emailText(MALFORMED);
    expect(t).toContain('ocelot-77');
    expect(t).not.toContain('X-Broken');
  });

  test('a hostile message is cut to its first parts before parsing', async () => {
    const parts = Array.from({ length: 5000 }, (_, i) => `--h\r\nContent-Type: text/plain\r\n\r\nword${i}\r\n`).join('');
    const t = await emailText(`Subject: many\r\nContent-Type: multipart/mixed; boundary=h\r\n\r\n${parts}--h--\r\n`);
    expect(t).toContain('word0');
    expect(t).not.toContain(`word${MAX_EMAIL_PARTS + 1}`);
  });

  test('derivation indexes email and base64url bodies as their decoded text', async () => {
    const doc = buildVcon({
      dialog: [
        emailDialog(ALTERNATIVE),
        emailDialog(Buffer.from(FORWARDED).toString('base64url'), { encoding: 'base64url' }),
        { type: 'text', mediatype: 'text/plain', encoding: 'base64url', body: Buffer.from('caracal sighting').toString('base64url') },
        { type: 'recording', mediatype: 'audio/wav', encoding: 'base64url', body: Buffer.from('RIFF wav').toString('base64url') },
      ],
    });
    const units = extractUnits(doc, await decodeBodies(doc));
    const dialog = units.filter((u) => u.source === 'dialog');
    expect(dialog.map((u) => u.idx)).toEqual([0, 1, 2]);
    expect(dialog[0].body).toContain('wolframite');
    expect(dialog[1].body).toContain('gooseneck');
    expect(dialog[2].body).toBe('caracal sighting');
    // Without decoding, an email body is not indexed raw (never headers or encoded blobs).
    expect(
      extractUnits(doc)
        .filter((u) => u.source === 'dialog')
        .map((u) => u.idx),
    ).toEqual([2]);
  });
});

describe('email vCons through REST and MCP', () => {
  let srv: TestServer;
  let mcp: HttpSession;
  const docs = {
    alternative: buildVcon({ subject: 'Billing', dialog: [emailDialog(ALTERNATIVE)] }),
    html: buildVcon({ subject: 'Delivery', dialog: [emailDialog(HTML_ONLY)] }),
    forwarded: buildVcon({ subject: 'Returns', dialog: [emailDialog(FORWARDED)] }),
    malformed: buildVcon({ subject: 'Heating', dialog: [emailDialog(MALFORMED)] }),
    plain: buildVcon({ subject: 'Membership', dialog: [{ ...emailDialog(PLAIN_EMAIL), mediatype: 'text/plain' }] }),
    encoded: buildVcon({
      subject: 'Encoded',
      dialog: [
        emailDialog(Buffer.from(crlf(['Subject: bike', '', 'The tandem bicycle chain keeps slipping.'])).toString('base64url'), {
          encoding: 'base64url',
        }),
      ],
    }),
    encodedText: buildVcon({
      subject: 'Encoded text',
      dialog: [
        {
          ...emailDialog(Buffer.from('My sourdough starter died in transit.').toString('base64url')),
          mediatype: 'text/plain',
          encoding: 'base64url',
        },
      ],
    }),
    other: buildVcon({ subject: 'Unrelated', turns: ['I would like to change the delivery address of my order.'] }),
  };
  // A word only in each body, and a description of it for the semantic route.
  const cases: [keyof typeof docs, string, string][] = [
    ['alternative', 'wolframite', 'card debited twice, second payment should be refunded'],
    ['html', 'terrarium', 'courier left the terrarium outside in the rain'],
    ['forwarded', 'gooseneck', 'kettle lid hinge snapped and the spout leaks'],
    ['malformed', 'ocelot', 'thermostat error every morning'],
    ['plain', 'marzipan', 'cancel gym membership next month'],
    ['encoded', 'tandem', 'tandem bicycle chain slipping'],
    ['encodedText', 'sourdough', 'sourdough starter died in transit'],
  ];

  beforeAll(async () => {
    srv = await startTestServer();
    // wait_for=search: a search's own catch-up is bounded (2 s), which a loaded machine can pass.
    const r = await srv.api('/vcons/batch?wait_for=search', { method: 'POST', json: Object.values(docs) });
    expect(r.status).toBe(201);
    mcp = await connectHttp(srv.instance.url!, KEY);
  });
  afterAll(async () => {
    await mcp?.close();
    await srv?.close();
  });

  const rest = async (kind: string, q: string) => {
    const r = await srv.api(`/vcons/search/${kind}?${new URLSearchParams({ q })}`);
    expect(r.status).toBe(200);
    return r.body.results as { uuid: string; matches: { source: string; snippet: string }[] }[];
  };
  const tool = async (kind: string, q: string) => {
    const r = await mcp.call(`search_vcons_${kind}`, { q });
    expect(r.isError).toBeFalsy();
    return r.structuredContent.results as { uuid: string; matches: { snippet: string }[] }[];
  };

  test.each(cases)('%s: a body-only word is found by keyword, semantic and hybrid (REST and MCP)', async (name, word) => {
    const uuid = docs[name].uuid;
    for (const kind of ['content', 'hybrid']) {
      expect((await rest(kind, word))[0]?.uuid, `${kind} ${word}`).toBe(uuid);
      expect((await tool(kind, word))[0]?.uuid, `mcp ${kind} ${word}`).toBe(uuid);
    }
    // One word against a whole message: among the first three of eight (the word's hashed feature).
    expect(
      (await rest('semantic', word)).slice(0, 3).map((r) => r.uuid),
      `semantic ${word}`,
    ).toContain(uuid);
    expect(
      (await tool('semantic', word)).slice(0, 3).map((r) => r.uuid),
      `mcp semantic ${word}`,
    ).toContain(uuid);
    const [hit] = await rest('content', word);
    const snippet = hit.matches.find((m) => m.source === 'dialog')!.snippet;
    expect(snippet.toLowerCase()).toContain(word);
    expect(snippet).not.toMatch(/Content-Type|Content-Transfer-Encoding|=[0-9A-F]{2}|<\/?[a-z]+>|^[A-Za-z0-9_-]{40,}$/);
  });

  test.each(cases)('%s: a description of the email finds it semantically', async (name, _word, description) => {
    expect((await rest('semantic', description)).slice(0, 3).map((r) => r.uuid)).toContain(docs[name].uuid);
  });
});
