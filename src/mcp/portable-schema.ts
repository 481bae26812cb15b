// JSON Schema for tool arguments in the subset every MCP client can map, checked by the MCP
// Inspector's strict mode (tests/mcp/inspector.test.ts): every schema names what it accepts, and
// each `type` is a single name. Clients that translate tool schemas into single-`type` dialects
// (Gemini's function declarations, OpenAPI 3.0) reject `type: [...]` and drop schemas that carry no
// keyword. The contract stays the one the domain schemas state; only the spelling changes.
import { z } from 'zod';

type Json = Record<string, unknown>;

/** Every JSON value, spelled as branches of one type each (what `unknown` means as an argument). */
const ANY_JSON_VALUE = ['string', 'number', 'boolean', 'object', 'array', 'null'] as const;

/** The keywords that apply to one instance type, moved into that type's branch when a union is split. */
const KEYWORDS_OF_TYPE: Record<string, readonly string[]> = {
  string: ['minLength', 'maxLength', 'pattern', 'format'],
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'],
  integer: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'],
  array: ['items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems', 'uniqueItems', 'contains'],
  object: ['properties', 'required', 'additionalProperties', 'patternProperties', 'propertyNames', 'minProperties', 'maxProperties'],
};

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `{type: [a, b], ...}` → `{anyOf: [{type: a, ...a's keywords}, {type: b, ...}]}`, in place. */
function splitTypeUnion(node: Json): void {
  const types = node.type as string[];
  const branches = types.map((type) => {
    const branch: Json = { type };
    for (const k of KEYWORDS_OF_TYPE[type] ?? []) if (k in node) branch[k] = node[k];
    return branch;
  });
  for (const type of types) for (const k of KEYWORDS_OF_TYPE[type] ?? []) delete node[k];
  delete node.type;
  if (node.anyOf === undefined) node.anyOf = branches;
  else node.allOf = [...((node.allOf as unknown[]) ?? []), { anyOf: branches }];
}

function walk(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) walk(item);
    return;
  }
  if (!isRecord(node)) return;
  if (Array.isArray(node.type)) splitTypeUnion(node);
  for (const [key, value] of Object.entries(node)) {
    // Values of these keywords are data, not schemas.
    if (key === 'enum' || key === 'const' || key === 'default' || key === 'examples' || key === 'required') continue;
    walk(value);
  }
}

/**
 * The JSON Schema (draft 7, input side) of a domain schema, spelled portably: values of any type
 * become an `anyOf` of single types, fields that must be absent become `{not: {}}`, and type
 * unions become `anyOf` branches.
 */
export function portableJsonSchema(schema: z.ZodType): Json {
  const js = z.toJSONSchema(schema, {
    target: 'draft-7',
    io: 'input',
    unrepresentable: 'any',
    override: ({ zodSchema, jsonSchema }) => {
      const kind = zodSchema._zod.def.type;
      const node = jsonSchema as Json;
      if (kind === 'unknown' || kind === 'any') node.anyOf = ANY_JSON_VALUE.map((type) => ({ type }));
      else if (kind === 'undefined') node.not = {};
    },
  }) as Json;
  delete js.$schema;
  walk(js);
  return js;
}
