// Example plugin: masks phone numbers on every read (REST, MCP tools and resources alike), keeping
// the last two digits. Load it with VCON_PLUGINS_PATH=./scripts/plugins/redact-phones.mjs
// A plugin is { name, version, hooks?, tools? }; see README § "Plugins".

const PHONE = /\+?\d[\d\s().-]{6,}\d/g;
const mask = (s) => s.replace(PHONE, (m) => m.replace(/\d(?=(?:\D*\d){2})/g, '•'));

function redact(value) {
  if (typeof value === 'string') return mask(value);
  if (Array.isArray(value)) return value.map(redact);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redact(v)]));
  }
  return value;
}

export default {
  name: 'redact-phones',
  version: '1.0.0',
  hooks: {
    // Return a new object: the stored document is never changed, only what readers see.
    afterRead: (vcon) => redact(vcon),
  },
};
