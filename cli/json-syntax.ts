// Where JSON text stops being JSON, as a line and column: a file import refuses is named by place,
// never quoted (JSON.parse's message quotes the text's first characters, whatever the file holds).

/** The 1-based line and column of the first character that breaks `text` as JSON (its end when the text stops early). */
export function jsonSyntaxPosition(text: string): { line: number; column: number } {
  const at = firstErrorOffset(text);
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i < at; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: at - lineStart + 1 };
}

const WS = new Set([' ', '\t', '\n', '\r']);
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
// JSON strings may not hold raw control characters: the grammar names them.
// eslint-disable-next-line no-control-regex
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

/** The offset of the first character that breaks `text` as JSON (iterative: any depth). */
function firstErrorOffset(text: string): number {
  let i = 0;
  const skip = () => {
    while (i < text.length && WS.has(text[i])) i++;
  };
  const match = (re: RegExp) => {
    re.lastIndex = i;
    if (!re.test(text)) return false;
    i = re.lastIndex;
    return true;
  };
  // What the parser expects next; the stack holds the open containers ('{' or '[').
  const stack: string[] = [];
  let expect: 'value' | 'key' | 'after' = 'value';
  for (;;) {
    skip();
    if (i >= text.length) return text.length;
    const c = text[i];
    if (expect === 'value') {
      if (c === '{' || c === '[') {
        stack.push(c);
        i++;
        skip();
        if (text[i] === (c === '{' ? '}' : ']')) {
          stack.pop();
          i++;
          expect = 'after';
        } else expect = c === '{' ? 'key' : 'value';
        continue;
      }
      const literal = ['true', 'false', 'null'].find((w) => text.startsWith(w, i));
      if (literal) i += literal.length;
      else if (!(c === '"' ? match(STRING) : match(NUMBER))) return i;
      expect = 'after';
    } else if (expect === 'key') {
      if (c !== '"' || !match(STRING)) return i;
      skip();
      if (text[i] !== ':') return i;
      i++;
      expect = 'value';
    } else {
      const top = stack[stack.length - 1];
      if (top === undefined) return i; // text after the whole value
      if (c === ',') {
        i++;
        expect = top === '{' ? 'key' : 'value';
      } else if (c === (top === '{' ? '}' : ']')) {
        stack.pop();
        i++;
      } else return i;
    }
  }
}
