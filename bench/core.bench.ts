/**
 * The pure core in Node: what validation and freezing cost. Baseline: the
 * naive way, plain arrays and JSON round-trip copies without validation.
 * Run with `npm run bench` (or `npx tsx bench/core.bench.ts`).
 */
import { WorkingContext, type Message } from '../src/core/index.js';
import { measure } from './lib/measure.js';
import { report, type BenchRow } from './lib/report.js';

const N = 10_000;
const messages: Message[] = Array.from({ length: N }, (_, i) =>
  i % 2 === 0
    ? { role: 'user', content: `Question ${i}: what about option ${i % 7}?`, name: `user-${i % 3}` }
    : { role: 'assistant', content: `Answer ${i}: `.padEnd(120, 'x') },
);

const rows: BenchRow[] = [];

const append = await measure(() => {
  const ctx = new WorkingContext();
  for (const message of messages) ctx.append(message);
}, { runs: 15 });
const appendNaive = await measure(() => {
  const list: Message[] = [];
  for (const message of messages) list.push(JSON.parse(JSON.stringify(message)) as Message);
}, { runs: 15 });
rows.push({ case: `append ${N} messages (validated, frozen)`, unit: 'ms (median)', tabula: append.medianMs, baseline: appendNaive.medianMs, ratio: append.medianMs / appendNaive.medianMs, note: 'baseline: JSON copy, no validation' });

const ctx = new WorkingContext({ messages, scratchpad: { plan: { steps: Array.from({ length: 100 }, (_, i) => `step ${i}`) } } });
const fork = await measure(() => ctx.fork(), { runs: 30 });
const forkNaive = await measure(() => JSON.parse(JSON.stringify({ messages: ctx.messages, scratchpad: ctx.scratchpad() })) as unknown, { runs: 30 });
rows.push({ case: `fork a ${N}-message context`, unit: 'ms (median)', tabula: fork.medianMs, baseline: forkNaive.medianMs, ratio: fork.medianMs / forkNaive.medianMs, note: 'frozen messages are shared, not copied' });

const freezeKey = await measure(() => ctx.freeze().key(), { runs: 15 });
const stringify = await measure(() => JSON.stringify(ctx.messages), { runs: 15 });
rows.push({ case: `freeze().key() of ${N} messages`, unit: 'ms (median)', tabula: freezeKey.medianMs, baseline: stringify.medianMs, ratio: freezeKey.medianMs / stringify.medianMs, note: 'baseline: JSON.stringify (order-sensitive)' });

report({
  name: 'core',
  title: 'Pure core (Node)',
  baseline: 'plain arrays and JSON copies with no validation, measured in the same run',
  rows,
});
