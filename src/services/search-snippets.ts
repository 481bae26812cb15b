// Snippets of search matches (docs/api.md "Search": at most 300 characters, decoded text).

export const SNIPPET_CHARS = 300;

/** Collapses whitespace and cuts at a word boundary, marking cuts with an ellipsis. */
export function clipSnippet(text: string, max = SNIPPET_CHARS): string {
  const s = text.replace(/\s+/g, ' ').trim();
  if (s.length <= max) return s;
  const cut = s.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${space > max * 0.6 ? cut.slice(0, space) : cut}…`;
}

/** A window of a unit's text around the first query word it contains (its start otherwise). */
export function windowSnippet(body: string, q: string, max = SNIPPET_CHARS): string {
  const text = body.replace(/\s+/g, ' ').trim();
  if (text.length <= max) return text;
  const lower = text.toLowerCase();
  const words = q.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? [];
  let at = -1;
  for (const w of words) {
    const i = lower.indexOf(w.length > 5 ? w.slice(0, w.length - 2) : w);
    if (i >= 0 && (at < 0 || i < at)) at = i;
  }
  if (at < 0) return clipSnippet(text, max);
  let start = Math.max(0, at - Math.floor(max / 3));
  const sp = text.lastIndexOf(' ', start);
  if (start > 0 && sp > start - 20) start = sp + 1;
  const head = start > 0 ? '…' : '';
  return head + clipSnippet(text.slice(start), max - head.length);
}
