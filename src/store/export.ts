/**
 * The export format of a session: versioned JSON described by a zod
 * schema, so a file written today can be validated and imported later, in
 * another browser or on the server.
 */
import * as z from 'zod';
import { TabulaError, describeIssues } from '../core/errors.js';
import { JsonValueSchema } from '../core/json.js';
import { MessageSchema } from '../core/message.js';
import { MessageStatusSchema, OrderKeySchema, PrefixDataSchema, StateFieldsSchema } from '../core/ops.js';

/** Version 1 of the session export format. */
export const SessionExportSchema = z.strictObject({
  format: z.literal('tabula.session'),
  formatVersion: z.literal(1),
  userId: z.string().min(1),
  sessionId: z.string().min(1),
  createdAt: z.number(),
  updatedAt: z.number(),
  version: z.number().int().nonnegative(),
  forkOf: z.strictObject({ userId: z.string(), sessionId: z.string() }).nullable(),
  prefix: PrefixDataSchema,
  state: StateFieldsSchema,
  messages: z.array(
    z.strictObject({
      id: z.string().min(1).max(128),
      order: OrderKeySchema,
      createdAt: z.number(),
      status: MessageStatusSchema,
      message: MessageSchema,
    }),
  ),
  journal: z.strictObject({ entries: z.array(JsonValueSchema), watermark: z.number().int().nonnegative() }),
  notes: z.array(
    z.strictObject({ text: z.string().max(500), runId: z.string().nullable(), scope: z.string().nullable(), at: z.number() }),
  ),
  memory: z.array(z.strictObject({ scope: z.string().min(1), key: z.string().min(1).max(128), value: JsonValueSchema })),
  /** The blackboard's content (absent in exports that had none). */
  blackboard: z.record(z.string(), JsonValueSchema).optional(),
});

/** A session as portable JSON (see {@link SessionExportSchema}). */
export type SessionExport = z.infer<typeof SessionExportSchema>;

/** Validates an export; throws `schema/invalid` naming each bad field. */
export function parseSessionExport(value: unknown): SessionExport {
  const result = SessionExportSchema.safeParse(value);
  if (!result.success) {
    throw new TabulaError('schema/invalid', `Not a valid Tabula session export: ${describeIssues(result.error.issues)}.`, {
      issues: result.error.issues,
    });
  }
  return result.data;
}
