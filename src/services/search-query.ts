// A keyword query in web-search syntax, read for ranked (OR) search: plain words are ranked
// terms (a vCon matching more of them, and rarer ones, ranks higher), "quoted phrases" must
// appear, -word and -"phrase" must not, and `or` between words changes nothing (OR is the default).

export type TermKind = 'word' | 'phrase' | 'not';

export interface QueryTerm {
  kind: TermKind;
  text: string;
}

/** Terms of one query: more are ignored (each costs a posting-list lookup). */
export const MAX_TERMS = 32;

/** Splits a query into its terms, in order. */
export function parseKeywordQuery(q: string): QueryTerm[] {
  const terms: QueryTerm[] = [];
  const re = /(-?)"([^"]*)"?|(\S+)/g;
  for (let m = re.exec(q); m && terms.length < MAX_TERMS; m = re.exec(q)) {
    if (m[2] !== undefined) {
      const text = m[2].trim();
      if (text) terms.push({ kind: m[1] ? 'not' : 'phrase', text });
      continue;
    }
    const tok = m[3];
    if (/^or$/i.test(tok)) continue;
    if (tok.startsWith('-') && tok.length > 1) terms.push({ kind: 'not', text: tok.slice(1) });
    else terms.push({ kind: 'word', text: tok });
  }
  return terms;
}

/** The query with some words replaced (corrections), everything else as typed. */
export function rewriteQuery(q: string, replace: ReadonlyMap<string, string>): string {
  if (replace.size === 0) return q;
  return q.replace(/(-?"[^"]*"?)|(\S+)/g, (all, quoted: string | undefined) => (quoted ? all : (replace.get(all) ?? all)));
}
