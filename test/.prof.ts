import { createSyncServer, sqliteStore } from '../src/server/index.js';
import { SECRET, noteOp, tokenFor } from './server/helpers.js';
const store = sqliteStore('/tmp/prof.db');
const server = createSyncServer({ store, auth: { secret: SECRET } });
const u = 'prof-' + Date.now();
const token = await tokenFor(u);
for (let p = 0; p < 20; p++) {
  const items = Array.from({ length: 100 }, (_, i) => ({ seq: p * 100 + i + 1, op: noteOp(u, 's', p * 100 + i + 1, `note ${i}: ${'lorem ipsum '.repeat(4)}`) }));
  await server.fetch(new Request('http://t/v1/push', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ clientId: 'c', items }) }));
}
const t = (label: string, n: number, f: () => Promise<unknown>) => async () => { const s = performance.now(); for (let i = 0; i < n; i++) await f(); console.log(label, ((performance.now() - s) / n).toFixed(2), 'ms'); };
const pullReq = () => new Request('http://t/v1/pull', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ cursor: null, limit: 1000 }) });
await t('fetch pull text', 30, async () => (await server.fetch(pullReq())).text())();
await t('fetch pull json', 30, async () => (await server.fetch(pullReq())).json())();
await t('store pull', 30, () => store.pull(u, 0, 1000))();
const l = await server.listen({ port: 0 });
const http = () => fetch(l.url + '/v1/pull', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ cursor: null, limit: 1000 }) });
await t('http pull arraybuffer', 30, async () => (await http()).arrayBuffer())();
await t('http pull json', 30, async () => (await http()).json())();
const body = JSON.stringify({ clientId: 'c', items: Array.from({ length: 100 }, (_, i) => ({ seq: i + 1, op: noteOp(u, 's', i + 1) })) });
await t('fetch push (retry, validation only)', 50, async () => (await server.fetch(new Request('http://t/v1/push', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body }))).text())();
await t('jwt verify via health-less pull empty', 50, async () => (await server.fetch(new Request('http://t/v1/pull', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{"cursor":"99999"}' }))).text())();
await l.close(); await store.close();
