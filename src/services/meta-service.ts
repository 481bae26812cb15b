import { z } from 'zod';
import { NotFoundError } from '../domain/errors.js';
import { EXAMPLES, EXAMPLE_TYPES } from '../domain/examples.js';
import { DEFAULT_MAX_ELEMENTS, MAX_DEPTH, vconSchemas, type ValidationMode } from '../domain/vcon.js';
import type { JsonObject } from '../domain/vcon.js';

/** The bounds a document must keep besides its schema (they are not JSON Schema keywords). */
export interface DocumentLimits {
  /** REST_API_BODY_LIMIT: bytes of one request body. */
  bodyBytes: number;
  /** VCON_MAX_ELEMENTS: JSON values of one request body or one vCon. */
  elements: number;
  /** Nesting levels of a vCon. */
  depth: number;
}

/** The vCon JSON Schema of the group's validation mode (generated from the validator's own zod schema) and the examples. */
export function createMetaService(
  limits: DocumentLimits = { bodyBytes: 20 * 1024 ** 2, elements: DEFAULT_MAX_ELEMENTS, depth: MAX_DEPTH },
  mode: ValidationMode = 'strict',
) {
  let schema: JsonObject | undefined;
  return {
    schema(): JsonObject {
      schema ??= {
        ...(z.toJSONSchema(vconSchemas(mode).Vcon, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }) as JsonObject),
        $id: 'https://vcon-launch.local/schema/vcon.json',
        title: 'vCon',
        description:
          `A vCon as accepted by this service (docs/api.md "Validation") in validation mode ${mode} (VCON_VALIDATION). Unknown fields are kept. ` +
          `Bounds (x-limits): a request body of at most ${limits.bodyBytes} bytes (413 payload_too_large), ` +
          `at most ${limits.elements} JSON values in one request body or one vCon (413 too_many_elements), ` +
          `nested at most ${limits.depth} levels (400 validation_failed).`,
        'x-limits': { max_body_bytes: limits.bodyBytes, max_elements: limits.elements, max_depth: limits.depth },
        'x-validation': mode,
      };
      return schema;
    },
    example(type: string): JsonObject {
      // Own keys only: `constructor` or `toString` must not find Object.prototype's.
      const ex = Object.hasOwn(EXAMPLES, type) ? EXAMPLES[type] : undefined;
      if (!ex) throw new NotFoundError('example', type, `Known types: ${EXAMPLE_TYPES.join(', ')}`);
      return structuredClone(ex);
    },
    exampleTypes: () => EXAMPLE_TYPES,
  };
}

export type MetaService = ReturnType<typeof createMetaService>;
