/**
 * The demo's service worker: precaches the built app on install, so after
 * one visit the demo loads with the network off. Assets are served cache
 * first (their names carry content hashes); pages are fetched fresh when
 * the network answers and from the cache when it does not. The sync server
 * and the demo API are never cached: they are live data, and the app
 * already handles them being out of reach.
 *
 * The `__PRECACHE__` and `__VERSION__` placeholders are filled in by scripts/demo-pwa.ts at build time.
 */
/**
 * The few service-worker types used here: the project's tsconfig has the DOM lib, and the WebWorker
 * lib cannot join it in one program.
 * @typedef {Event & { waitUntil(promise: Promise<unknown>): void }} ExtendableEvent
 * @typedef {ExtendableEvent & { readonly request: Request; respondWith(response: Promise<Response>): void }} FetchEvent
 * @typedef {{
 *   addEventListener(type: 'install' | 'activate', listener: (event: ExtendableEvent) => void): void;
 *   addEventListener(type: 'fetch', listener: (event: FetchEvent) => void): void;
 *   skipWaiting(): Promise<void>;
 *   readonly clients: { claim(): Promise<void> };
 *   readonly registration: { readonly scope: string };
 *   readonly location: Location;
 * }} WorkerScope
 */
const sw = /** @type {WorkerScope} */ (/** @type {unknown} */ (self));
/** @type {string[]} */
const PRECACHE = [] /* __PRECACHE__ */;
const CACHE = `tabula-demo-${'dev' /* __VERSION__ */}`;
const LIVE = /^\/(?:sync|demo-api)(?:\/|$)/;

sw.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(PRECACHE))
      .then(() => sw.skipWaiting()),
  );
});

sw.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((key) => key.startsWith('tabula-demo-') && key !== CACHE).map((key) => caches.delete(key))))
      .then(() => sw.clients.claim()),
  );
});

sw.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== sw.location.origin || LIVE.test(url.pathname)) return;
  if (event.request.mode === 'navigate') {
    // A page: fresh when online, the precached copy (query and hash ignored) when not.
    event.respondWith(
      fetch(event.request).catch(async () => {
        const cache = await caches.open(CACHE);
        return (await cache.match(url.pathname, { ignoreSearch: true, ignoreVary: true })) ?? (await cache.match(sw.registration.scope, { ignoreSearch: true, ignoreVary: true })) ?? Response.error();
      }),
    );
    return;
  }
  // ignoreVary: the preview server varies on Origin, and a module script's request has one while addAll's had none.
  event.respondWith(caches.match(event.request, { ignoreSearch: true, ignoreVary: true }).then((hit) => hit ?? fetch(event.request)));
});
