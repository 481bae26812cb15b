import { z } from 'zod';
import { NotFoundError } from '../domain/errors.js';
import { EXAMPLES, EXAMPLE_TYPES } from '../domain/examples.js';
import { Vcon } from '../domain/vcon.js';
import type { JsonObject } from '../domain/vcon.js';

/** The vCon JSON Schema (generated from the validator's own zod schema) and the examples. */
export function createMetaService() {
  let schema: JsonObject | undefined;
  return {
    schema(): JsonObject {
      schema ??= {
        ...(z.toJSONSchema(Vcon, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }) as JsonObject),
        $id: 'https://vcon-launch.local/schema/vcon.json',
        title: 'vCon',
        description: 'A vCon as accepted by this service (API.md "Validation"). Unknown fields are kept.',
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
