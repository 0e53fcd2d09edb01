import { PushRequestSchema } from '../src/sync/protocol.js';
import { noteOp } from './server/helpers.js';
const items = Array.from({ length: 100 }, (_, i) => ({ seq: i + 1, op: noteOp('u', 's', i + 1, `note ${i}: ${'lorem ipsum '.repeat(4)}`) }));
const body = JSON.stringify({ clientId: 'c', items });
for (const label of ['warm', 'measure']) {
  let s = performance.now();
  for (let i = 0; i < 200; i++) JSON.parse(body);
  const parse = (performance.now() - s) / 200;
  s = performance.now();
  for (let i = 0; i < 200; i++) PushRequestSchema.safeParse(JSON.parse(body));
  console.log(label, 'parse', parse.toFixed(3), 'parse+zod', ((performance.now() - s) / 200).toFixed(3));
}
