// Example plugin: masks phone numbers on every read, list and search (REST, MCP tools and resources alike), keeping
// the last two digits. Load it with VCON_PLUGINS_PATH=./scripts/plugins/redact-phones.mjs
// A plugin is { name, version, hooks?, tools? }; see docs/plugins.md.

// A phone number stands alone: not glued to letters, digits or dashes (so UUIDs, dates and
// hashes, whose digit runs touch hex letters, `T` or `-`, are left alone).
// `*` may sit inside: search snippets mark hit words with `**`, so a hit on "4567" must not shield
// the rest of "+1 555 123 **4567**".
const PHONE = /(?<![\w-])\+?\(?\d[\d\s().*-]{6,}\d(?![\w-])/g;
// Identifiers, timestamps and integrity fields are never phone numbers.
const SKIP_KEYS = /(^|_)(uuid|id|at|start|date|vcon|content_hash|signature|url|encoding|mediatype|mimetype)$/;

const mask = (s) => s.replace(PHONE, (m) => m.replace(/\d(?=(?:\D*\d){2})/g, '•'));

function redact(value, key = '') {
  if (typeof value === 'string') return SKIP_KEYS.test(key) ? value : mask(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, key));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redact(v, k)]));
  }
  return value;
}

export default {
  name: 'redact-phones',
  version: '1.0.0',
  hooks: {
    // Return a new object: the stored document is never changed, only what readers see.
    afterRead: (vcon) => redact(vcon),
    // Lists and searches answer with subjects and snippets, not whole documents: mask those too.
    // Bare strings are uuids (ids_only, tag search) and stay as they are.
    afterSearch: (results) => results.map((r) => (r && typeof r === 'object' ? redact(r) : r)),
  },
};
