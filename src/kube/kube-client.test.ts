/** The lean Kubernetes client against the in-test API server over TLS, faults included. */
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { type FileHandle, link, open, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isWeftError } from '../core/errors.js';
import { agentUser, startKubeFixture } from '../testing/kube-fixture.js';
import { startTcpProxy } from '../testing/tcp-proxy.js';
import { waitUntil } from '../testing/wait.js';
import { KubeApiError, type KubeClient, type WatchEvent } from './kube-client.js';

const signal = (): AbortSignal => AbortSignal.timeout(20_000);
const smp = () => ({ contentType: 'application/strategic-merge-patch+json' as const, signal: signal() });

/** One list page: its items collected, as a test wants them. */
async function list(client: KubeClient, query: Parameters<KubeClient['list']>[1] = {}): Promise<{ items: unknown[]; resourceVersion: string; continue?: string }> {
  const items: unknown[] = [];
  const page = await client.list('/api/v1/nodes', query, { signal: signal(), onItem: (n) => items.push(n) });
  return { ...page, items };
}

async function listAll(client: KubeClient, limit = 500): Promise<{ names: string[]; rv: string }> {
  let page = await list(client, { resourceVersion: '0', limit });
  const names = page.items.map((n) => (n as { metadata: { name: string } }).metadata.name);
  const rv = page.resourceVersion;
  while (page.continue) {
    page = await list(client, { continue: page.continue, limit });
    names.push(...page.items.map((n) => (n as { metadata: { name: string } }).metadata.name));
  }
  return { names, rv };
}

async function collect(events: AsyncIterable<WatchEvent>, until: (seen: WatchEvent[]) => boolean): Promise<WatchEvent[]> {
  const seen: WatchEvent[] = [];
  for await (const e of events) {
    seen.push(e);
    if (until(seen)) break;
  }
  return seen;
}

const describe = (e: WatchEvent): string => (e.type === 'BOOKMARK' ? 'BOOKMARK' : `${e.type} ${(e.object['metadata'] as { name: string }).name}`);

test('lists page through continue tokens, with client-go\'s query strings; watch, patch and list share one HTTP/2 connection', async (t) => {
  const f = await startKubeFixture(t, { pageCap: 2, watchCache: false });
  for (let i = 1; i <= 5; i++) f.server.createNode(`n${i}`);
  const client = f.client();
  const { names, rv } = await listAll(client);
  assert.deepEqual(names, ['n1', 'n2', 'n3', 'n4', 'n5']);
  const requests = f.server.requests.map((r) => r.url);
  assert.equal(requests[0], '/api/v1/nodes?limit=500&resourceVersion=0');
  assert.match(requests[1]!, /^\/api\/v1\/nodes\?continue=[^&]+&limit=500$/);
  const events = await client.watch('/api/v1/nodes', { resourceVersion: rv, timeoutSeconds: 60 }, signal());
  assert.match(f.server.requests.at(-1)!.url, new RegExp(`^/api/v1/nodes\\?allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=60&watch=true$`));
  const patched = await client.patch('/api/v1/nodes/n1/status', { metadata: { annotations: { a: '1' } } }, smp());
  assert.equal((patched['metadata'] as { annotations: Record<string, string> }).annotations['a'], '1');
  f.server.deleteNode('n2');
  f.server.bookmark();
  const seen = await collect(events, (s) => s.length === 3);
  assert.deepEqual(seen.map(describe), ['MODIFIED n1', 'DELETED n2', 'BOOKMARK']);
  await listAll(client);
  assert.equal(f.server.connections, 1, 'one connection for everything');
  assert.ok(f.server.requests.every((r) => r.httpVersion === '2.0' && r.user === agentUser));
  const patch = f.server.requests.find((r) => r.url === '/api/v1/nodes/n1/status');
  assert.equal(patch?.contentType, 'application/strategic-merge-patch+json');
});

test('non-ASCII annotations survive lists and watches, however the bytes are framed', async (t) => {
  const f = await startKubeFixture(t);
  const text = 'zürich 東京 😀 '.repeat(3000);
  f.server.createNode('n1', {}, { note: text });
  const client = f.client();
  const { items, resourceVersion } = await list(client, {});
  assert.equal((items[0] as { metadata: { annotations: Record<string, string> } }).metadata.annotations['note'], text);
  const events = await client.watch('/api/v1/nodes', { resourceVersion, timeoutSeconds: 60 }, signal());
  f.server.updateNode('n1', (n) => (n.metadata.annotations!['note2'] = text));
  const [ev] = await collect(events, (s) => s.length === 1);
  assert.equal(ev?.type === 'MODIFIED' && (ev.object['metadata'] as { annotations: Record<string, string> }).annotations['note2'], text);
});

test('a watch that the server ends after timeoutSeconds ends cleanly', async (t) => {
  const f = await startKubeFixture(t);
  const client = f.client();
  const events = await client.watch('/api/v1/nodes', { resourceVersion: String(f.server.store.resourceVersion), timeoutSeconds: 1 }, signal());
  assert.deepEqual(await collect(events, () => false), []);
});

test('error statuses carry codes, HTTP status, reason and Retry-After', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('n1');
  const client = f.client();
  f.server.inject({ on: 'list', kind: 'throttle', retryAfterS: 3 });
  await assert.rejects(list(client, {}), (err) => err instanceof KubeApiError && err.code === 'WEFT_ERR_KUBE_API' && err.status === 429 && err.retryAfterMs === 3000);
  f.server.inject({ on: 'list', kind: 'error' });
  await assert.rejects(list(client, {}), (err) => err instanceof KubeApiError && err.status === 500 && err.reason === 'InternalError');
  f.server.inject({ on: 'list', kind: 'gone' });
  await assert.rejects(list(client, {}), (err) => isWeftError(err, 'WEFT_ERR_COMPACTED'));
  await assert.rejects(client.patch('/api/v1/nodes/nope/status', {}, smp()), (err) => err instanceof KubeApiError && err.status === 404);
  await f.rotateToken('agent-token-2');
  f.server.setUsers([]);
  await assert.rejects(list(client, {}), (err) => err instanceof KubeApiError && err.status === 401);
});

test('a list cut off mid-body is an error naming the break, and the next request gets a new connection', async (t) => {
  const f = await startKubeFixture(t);
  for (let i = 0; i < 200; i++) f.server.createNode(`node-${i}`, { podCIDR: `198.18.${i}.0/24` }, { pad: 'x'.repeat(2000) });
  const client = f.client();
  f.server.inject({ on: 'list', kind: 'cut', afterBytes: 20_000 });
  await assert.rejects(list(client, { resourceVersion: '0' }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  assert.equal((await listAll(client)).names.length, 200);
  assert.equal(f.server.connections, 2);
});

test('watch faults: half an event then a clean end, the connection cut mid-event, and an ERROR 410 event', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('n1');
  const client = f.client();
  const rv = (): string => String(f.server.store.resourceVersion);
  for (const kind of ['cut-event', 'cut'] as const) {
    f.server.inject({ on: 'watch', kind });
    const events = await client.watch('/api/v1/nodes', { resourceVersion: rv(), timeoutSeconds: 60 }, signal());
    f.server.updateNode('n1', (n) => (n.metadata.labels = { kind }));
    await assert.rejects(collect(events, () => false), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'), kind);
  }
  f.server.inject({ on: 'watch', kind: 'gone' });
  const events = await client.watch('/api/v1/nodes', { resourceVersion: rv(), timeoutSeconds: 60 }, signal());
  await assert.rejects(collect(events, () => false), (err) => err instanceof KubeApiError && err.code === 'WEFT_ERR_COMPACTED' && err.status === 410);
});

test('an answer that never comes, or stops halfway, ends at the deadline, for a list and for a watch\'s headers', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('n1', {}, { pad: 'x'.repeat(5000) });
  const client = f.client({ requestTimeoutMs: 300 });
  f.server.inject({ on: 'list', kind: 'hang' });
  await assert.rejects(list(client, {}), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  f.server.inject({ on: 'list', kind: 'stall', afterBytes: 1000 });
  await assert.rejects(list(client, {}), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  f.server.inject({ on: 'watch', kind: 'hang' });
  await assert.rejects(client.watch('/api/v1/nodes', { resourceVersion: '100', timeoutSeconds: 60 }, signal()), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  assert.equal((await list(client, {})).items.length, 1, 'the connection still works');
});

test('a rotated token file is used on the next request', async (t) => {
  const f = await startKubeFixture(t);
  const client = f.client();
  await list(client, {});
  await f.rotateToken('agent-token-2');
  await list(client, {});
  const users = f.server.requests.map((r) => r.user);
  assert.deepEqual(users, [agentUser, agentUser], 'both accepted: the second with the new token only');
});

test('requests go out in the order they were made, though each reads the token file', async (t) => {
  const f = await startKubeFixture(t);
  const client = f.client();
  const paths = Array.from({ length: 40 }, (_, i) => `/api/v1/nodes/n${i}`);
  await Promise.all(paths.map((p) => client.get(p, signal()).catch(() => undefined)));
  assert.deepEqual(f.server.requests.map((r) => r.url), paths);
});

test('a token file that cannot be read fails its request, and holds up none after it', async (t) => {
  const f = await startKubeFixture(t);
  const client = f.client();
  await rename(f.tokenFile, `${f.tokenFile}.away`);
  await assert.rejects(list(client, {}), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'));
  await rename(`${f.tokenFile}.away`, f.tokenFile);
  assert.equal((await list(client, {})).items.length, 0);
  assert.deepEqual(f.server.requests.map((r) => r.user), [agentUser], 'the failed read sent nothing');
});

test('a token read that fails while an earlier one is still waiting fails its own request alone', async (t) => {
  const f = await startKubeFixture(t);
  const client = f.client();
  const token = await readFile(f.tokenFile, 'utf8');
  // The token file as a FIFO: the first request's read waits until something writes to it.
  await unlink(f.tokenFile);
  execFileSync('mkfifo', [f.tokenFile]);
  // A second name for the FIFO, so that a failed test still ends the first read: a writer that
  // comes and goes (O_RDWR opens a FIFO without waiting for a reader).
  await link(f.tokenFile, `${f.tokenFile}.fifo`);
  let writer: FileHandle | undefined;
  try {
    const first = list(client, {});
    // A writer opens without waiting only once a reader has the FIFO open.
    await waitUntil('the first request reads the FIFO', async () => (writer = await open(f.tokenFile, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => undefined)) !== undefined);
    await unlink(f.tokenFile);
    // The second read fails at once (ENOENT) while the first waits: a rejection the second request
    // takes up only in its turn, after the first, and not an unhandled one meanwhile.
    const second = assert.rejects(list(client, {}), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'));
    await assert.rejects(readFile(f.tokenFile));
    await new Promise((resolve) => setImmediate(resolve));
    await writer!.write(token);
    await writeFile(f.tokenFile, token);
    await writer!.close();
    writer = undefined;
    assert.equal((await first).items.length, 0);
    await second;
    assert.deepEqual(f.server.requests.map((r) => r.user), [agentUser]);
  } finally {
    await writer?.close();
    await (await open(`${f.tokenFile}.fifo`, constants.O_RDWR | constants.O_NONBLOCK)).close();
  }
});

test('HTTP/1.1: plain http, and TLS to a server that does not offer HTTP/2', async (t) => {
  for (const options of [{ plainHttp: true }, { http2: false }]) {
    const f = await startKubeFixture(t, options);
    f.server.createNode('n1');
    const client = f.client();
    const { rv } = await listAll(client);
    const events = await client.watch('/api/v1/nodes', { resourceVersion: rv, timeoutSeconds: 60 }, signal());
    f.server.deleteNode('n1');
    assert.deepEqual((await collect(events, (s) => s.length === 1)).map(describe), ['DELETED n1']);
    await client.patch('/api/v1/nodes/n1/status', {}, smp()).catch(() => undefined);
    assert.ok(f.server.requests.filter((r) => r.user !== '').every((r) => r.httpVersion === '1.1'), JSON.stringify(options));
  }
});

test('a connection that silently stops carrying bytes is noticed by HTTP/2 PINGs and fails the watch on it', async (t) => {
  const f = await startKubeFixture(t);
  await using proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(f.url).port) });
  const client = f.client({ access: { ...f.access, server: new URL(`https://127.0.0.1:${proxy.port}`) }, pingIntervalMs: 200, pingTimeoutMs: 400 });
  const events = await client.watch('/api/v1/nodes', { resourceVersion: String(f.server.store.resourceVersion), timeoutSeconds: 300 }, signal());
  const alive = client.lastAlive();
  await waitUntil('PINGs answered while idle count as life', () => client.lastAlive() > alive);
  proxy.freeze();
  await assert.rejects(collect(events, () => false), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  proxy.restore();
  assert.equal((await list(client, {})).items.length, 0, 'a new connection works');
});

test('TLS without any ALPN (an HTTP/1.1 server behind a plain TLS terminator) also falls back to HTTP/1.1', async (t) => {
  const f = await startKubeFixture(t);
  const { createServer: createTlsServer } = await import('node:tls');
  const { createServer: createHttpServer } = await import('node:http');
  const versions: string[] = [];
  const http = createHttpServer((req, res) => {
    versions.push(req.httpVersion);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}');
  });
  const tls = createTlsServer({ cert: await f.ca.read(f.ca.serverCert), key: await f.ca.read(f.ca.serverKey) }, (socket) => http.emit('connection', socket));
  await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    http.closeAllConnections();
    tls.close();
  });
  const port = (tls.address() as { port: number }).port;
  const client = f.client({ access: { ...f.access, server: new URL(`https://127.0.0.1:${port}`) } });
  assert.equal((await list(client, {})).resourceVersion, '7');
  assert.deepEqual(versions, ['1.1']);
});

test('any collection by its path, with label and field selectors as client-go sends them; a path that is not the API\'s is refused before a request', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('n1');
  const client = f.client();
  await client.list('/api/v1/nodes', { labelSelector: 'kubernetes.io/os=linux', fieldSelector: 'metadata.name=n1', limit: 10 }, { signal: signal(), onItem: () => undefined });
  assert.equal(f.server.requests.at(-1)!.url, '/api/v1/nodes?fieldSelector=metadata.name%3Dn1&labelSelector=kubernetes.io%2Fos%3Dlinux&limit=10');
  const events = await client.watch('/api/v1/nodes', { resourceVersion: String(f.server.store.resourceVersion), timeoutSeconds: 1, fieldSelector: 'metadata.name=n1' }, signal());
  assert.equal(f.server.requests.at(-1)!.url, `/api/v1/nodes?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dn1&resourceVersion=${f.server.store.resourceVersion}&timeoutSeconds=1&watch=true`);
  await events[Symbol.asyncIterator]().return?.();
  const before = f.server.requests.length;
  for (const bad of ['https://elsewhere/api/v1/nodes', '/api/v1/nodes?watch=true', '/api/v1/../../healthz', 'api/v1/nodes', '/metrics', '/api//v1/nodes']) {
    await assert.rejects(client.get(bad, signal()), (err) => isWeftError(err, 'WEFT_ERR_INTERNAL'), bad);
  }
  assert.equal(f.server.requests.length, before, 'no request went out');
  assert.equal((await client.get('/api/v1/nodes/n1', signal()))['kind'], 'Node');
});
