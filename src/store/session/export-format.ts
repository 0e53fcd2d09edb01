/**
 * The export format of a session: versioned JSON described by a zod
 * schema, so a file written today can be validated and imported later, in
 * another browser or on the server.
 */
import * as z from 'zod/mini';
import { TabulaError, describeIssues, formatPath } from '../../core/errors.js';
import { JsonValueSchema, findJsonProblem, findKeyProblem, structuralEqual } from '../../core/json.js';
import { ID_MAX_LENGTH, KEY_MAX_LENGTH, nameSchema } from '../../core/names.js';
import { MessageSchema } from '../../core/message.js';
import { safeParse } from '../../core/validation.js';
import { MessageStatusSchema, OrderKeySchema, PrefixDataSchema, StateFieldsSchema, emptyStateFields } from '../../core/ops.js';
import { findNoteProblem } from '../note-text.js';

const IdName = nameSchema(ID_MAX_LENGTH);
const KeyName = nameSchema(KEY_MAX_LENGTH);

/** Version 1 of the session export format. */
export const SessionExportSchema = z
  .strictObject({
    format: z.literal('tabula.session'),
    formatVersion: z.literal(1),
    /** The user the session belonged to where it was exported; an import files it under the importing Tabula's user. */
    userId: IdName,
    sessionId: IdName,
    createdAt: z.number(),
    updatedAt: z.number(),
    version: z.number().check(z.int(), z.nonnegative()),
    forkOf: z.nullable(z.strictObject({ userId: IdName, sessionId: IdName })),
    prefix: PrefixDataSchema,
    state: StateFieldsSchema,
    messages: z.array(
      z.strictObject({
        id: z.string().check(z.minLength(1), z.maxLength(128)),
        order: OrderKeySchema,
        createdAt: z.number(),
        status: MessageStatusSchema,
        message: MessageSchema,
      }),
    ),
    journal: z.strictObject({ entries: z.array(JsonValueSchema), watermark: z.number().check(z.int(), z.nonnegative()) }),
    notes: z.array(
      z.strictObject({
        text: z.string().check(
          z.superRefine((text, ctx) => {
            const problem = findNoteProblem(text);
            if (problem) ctx.addIssue({ code: 'custom', message: problem });
          }),
        ),
        runId: z.nullable(KeyName),
        scope: z.nullable(KeyName),
        at: z.number(),
      }),
    ),
    memory: z.array(
      z.strictObject({
        scope: KeyName,
        key: KeyName,
        value: JsonValueSchema.check(
          z.superRefine((value, ctx) => {
            if (value === null) ctx.addIssue({ code: 'custom', message: 'a memory value cannot be null (memory.set refuses it; leave the key out)' });
          }),
        ),
      }),
    ),
    /** The blackboard's content (absent in exports that had none). */
    blackboard: z.optional(z.record(z.string(), JsonValueSchema)),
  })
  .check(z.superRefine((data, ctx) => {
    // Each of these would otherwise be dropped or changed silently on import.
    const messageIds = new Set<string>();
    data.messages.forEach((message, index) => {
      if (messageIds.has(message.id)) ctx.addIssue({ code: 'custom', path: ['messages', index, 'id'], message: `duplicate message id ${JSON.stringify(message.id)}` });
      messageIds.add(message.id);
    });
    const memoryKeys = new Set<string>();
    data.memory.forEach((entry, index) => {
      const key = JSON.stringify([entry.scope, entry.key]);
      if (memoryKeys.has(key)) ctx.addIssue({ code: 'custom', path: ['memory', index, 'key'], message: `duplicate memory key ${JSON.stringify(entry.key)} in scope ${JSON.stringify(entry.scope)}` });
      memoryKeys.add(key);
      const keyProblem = findKeyProblem(entry.key);
      if (keyProblem) ctx.addIssue({ code: 'custom', path: ['memory', index, 'key'], message: keyProblem });
    });
    if (data.version === 0 && !structuralEqual(data.state, emptyStateFields())) {
      ctx.addIssue({ code: 'custom', path: ['version'], message: 'version 0 means the state was never saved, but state holds values; give the version the state was saved at (≥ 1)' });
    }
    if (data.journal.watermark > data.journal.entries.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['journal', 'watermark'],
        message: `watermark ${data.journal.watermark} is past the ${data.journal.entries.length} journal entries`,
      });
    }
  }));

/** A session as portable JSON (see {@link SessionExportSchema}). */
export type SessionExport = z.infer<typeof SessionExportSchema>;

/**
 * Validates an export; throws `schema/invalid` naming each bad field. The
 * whole file is checked as JSON first, so a `__proto__` key or a value
 * nested too deep anywhere in it is named by its path instead of being
 * dropped or overflowing the stack.
 */
export function parseSessionExport(value: unknown): SessionExport {
  const problem = findJsonProblem(value);
  if (problem) {
    throw new TabulaError('schema/invalid', `Not a valid Tabula session export: ${formatPath(problem.path)}: ${problem.message}.`, { issues: [problem] });
  }
  const result = safeParse(SessionExportSchema, value);
  if (!result.success) {
    throw new TabulaError('schema/invalid', `Not a valid Tabula session export: ${describeIssues(result.error.issues)}.`, {
      issues: result.error.issues,
    });
  }
  return result.data;
}
