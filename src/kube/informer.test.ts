/** The informer over Nodes against the in-test API server over TLS: every fault ends in a converged cache. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type KubeFixture, startKubeFixture } from '../testing/kube-fixture.js';
import { type RecordingLogger, recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import type { Fault } from '../testing/kube-apiserver.js';
import { type Change, Informer } from './informer.js';
import { type NodeRecord, NodeRecords } from '../subnet/kube/annotations.js';

const P = 'flannel.alpha.coreos.com/';

interface Running {
  readonly informer: Informer<NodeRecord>;
  readonly log: RecordingLogger;
  /** What a subscriber has seen, applied: name → podCIDR. */
  readonly view: Map<string, string>;
  readonly batches: Change<NodeRecord>[][];
}

function start(f: KubeFixture, options: { requestTimeoutMs?: number; watchTimeoutSeconds?: number; pageSize?: number } = {}): Running {
  const log = recordingLogger();
  const client = f.client({ log, ...(options.requestTimeoutMs ? { requestTimeoutMs: options.requestTimeoutMs } : {}) });
  const informer = new Informer({
    api: client,
    path: '/api/v1/nodes',
    decoder: new NodeRecords(P),
    what: 'node',
    log,
    backoff: { initialMs: 20, maxMs: 100 },
    watchTimeoutSeconds: () => options.watchTimeoutSeconds ?? 300,
    ...(options.pageSize ? { pageSize: options.pageSize } : {}),
  });
  void informer.run(f.signal);
  const view = new Map<string, string>();
  const batches: Change<NodeRecord>[][] = [];
  void (async () => {
    for await (const batch of informer.changes(f.signal)) {
      batches.push(batch);
      for (const c of batch) {
        if (c.type === 'put') view.set(c.record.name, c.record.podCidrs[0] ?? '');
        else view.delete(c.record.name);
      }
    }
  })();
  return { informer, log, view, batches };
}

function addNodes(f: KubeFixture, count: number, from = 0): void {
  for (let i = from; i < from + count; i++) {
    f.server.createNode(`node-${i}`, { podCIDR: `198.18.${i % 250}.${i >= 250 ? 128 : 0}/25` }, { [`${P}public-ip`]: `203.0.113.${i % 250}`, 'other.example/pad': 'x'.repeat(2400) });
  }
}

/** The server's nodes as the view should hold them. */
function truth(f: KubeFixture): Map<string, string> {
  const out = new Map<string, string>();
  const list = f.server.store.list({});
  if ('items' in list) for (const n of list.items) out.set(n.metadata.name, n.spec.podCIDR ?? '');
  return out;
}

async function converged(f: KubeFixture, r: Running, what: string): Promise<void> {
  await waitUntil(what, () => r.view.size === truth(f).size && [...truth(f)].every(([k, v]) => r.view.get(k) === v), 20_000);
}

test('the first list comes in pages (resourceVersion=0, limit), the cache keeps only flannel annotations, and changes arrive once', async (t) => {
  const f = await startKubeFixture(t, { pageCap: 50, watchCache: false });
  addNodes(f, 120);
  const r = start(f);
  await converged(f, r, 'synced');
  const lists = f.server.requests.filter((q) => q.url.startsWith('/api/v1/nodes?') && !q.url.includes('watch=true'));
  assert.equal(lists.length, 3);
  assert.equal(lists[0]!.url, '/api/v1/nodes?limit=500&resourceVersion=0');
  assert.deepEqual(r.informer.get('node-1'), { name: 'node-1', podCidrs: ['198.18.1.0/25'], annotations: { [`${P}public-ip`]: '203.0.113.1' } });
  assert.equal(r.batches[0]!.length, 120, 'one first batch with every node');
  f.server.updateNode('node-1', (n) => (n.status = { heartbeat: 'later' }));
  f.server.updateNode('node-2', (n) => (n.spec = { podCIDR: '198.18.251.0/25' }));
  await waitUntil('node-2 moved', () => r.view.get('node-2') === '198.18.251.0/25');
  assert.deepEqual(r.batches.slice(1).flat().map((c) => `${c.type} ${c.record.name}`), ['put node-2'], 'a status-only update is no change');
});

/** The reproduction: the first list's body cut after 20 kB of about 500 kB. */
test('a first list cut off mid-body is retried, logged once, and all 200 nodes arrive', async (t) => {
  const f = await startKubeFixture(t);
  addNodes(f, 200);
  f.server.inject({ on: 'list', kind: 'cut', afterBytes: 20_000 });
  const r = start(f);
  await converged(f, r, 'all 200 nodes');
  assert.equal(r.view.size, 200);
  const failures = r.log.lines.filter((l) => l.msg === 'node list/watch failed; listing again');
  assert.equal(failures.length, 1);
  assert.equal((failures[0]!['err'] as { code: string }).code, 'WEFT_ERR_UNAVAILABLE');
  await waitUntil('recovery is logged', () => r.log.lines.some((l) => l.msg === 'node list/watch works again'));
});

const faults: Array<[string, Fault]> = [
  ['a watch stream closed in the middle of an event', { on: 'watch', kind: 'cut-event' }],
  ['a watch whose connection is cut mid-event', { on: 'watch', kind: 'cut' }],
  ['410 Gone on the watch', { on: 'watch', kind: 'gone' }],
  ['429 with Retry-After on the list', { on: 'list', kind: 'throttle', retryAfterS: 1 }],
  ['500 on the list', { on: 'list', kind: 'error', times: 2 }],
  ['500 on the watch', { on: 'watch', kind: 'error' }],
  ['a list that never answers', { on: 'list', kind: 'hang' }],
  ['a list that stops halfway', { on: 'list', kind: 'stall' }],
  ['a watch that never answers', { on: 'watch', kind: 'hang' }],
];

for (const [name, fault] of faults) {
  test(`${name}: the informer lists again and misses no change`, async (t) => {
    const f = await startKubeFixture(t);
    addNodes(f, 5);
    const r = start(f, { requestTimeoutMs: 500 });
    await converged(f, r, 'synced');
    f.server.inject(fault);
    // A list fault needs a list: a 410 on the next watch makes one. The open watch ends first.
    if (fault.on === 'list') f.server.inject({ on: 'watch', kind: 'gone' });
    const injected = (fault.times ?? 1) + (fault.on === 'list' ? 1 : 0);
    f.server.dropWatches();
    // Changes while the fault plays out: a node added, one deleted, one moved.
    f.server.updateNode('node-1', (n) => (n.spec = { podCIDR: '198.18.200.0/25' }));
    f.server.deleteNode('node-2');
    addNodes(f, 1, 9);
    await waitUntil('every fault fired', () => f.server.faultsFired === injected);
    await converged(f, r, `converged after ${name}`);
    if (fault.kind === 'throttle') {
      const line = r.log.lines.find((l) => l.msg === 'node list/watch failed; listing again');
      assert.equal(line?.['retryMs'], 1000, 'Retry-After is honoured instead of the backoff');
    }
  });
}

test('a continue token that expires mid-list falls back to one unpaged list', async (t) => {
  const f = await startKubeFixture(t, { pageCap: 2, watchCache: false });
  addNodes(f, 5);
  const log = recordingLogger();
  const client = f.client({ log });
  // Compact after the first page, as etcd's compaction would between two pages (as the second
  // is asked for, which may be while the first is still arriving).
  let compacted = false;
  const api = {
    list: async (...args: Parameters<typeof client.list>) => {
      if (args[1].continue && !compacted) {
        compacted = true;
        f.server.compact();
      }
      return client.list(...args);
    },
    watch: client.watch.bind(client),
    lastAlive: () => client.lastAlive(),
  };
  const informer = new Informer({ api, path: '/api/v1/nodes', decoder: new NodeRecords(P), what: 'node', log, backoff: { initialMs: 20, maxMs: 100 } });
  void informer.run(f.signal);
  await informer.whenSynced(f.signal);
  assert.equal(informer.size, 5);
  assert.ok(log.lines.some((l) => l.msg === 'node list: the continue token expired; listing again in one piece'));
});

test('pages are asked for one ahead: the next goes out as soon as a page names it, before that page is in', async (t) => {
  const f = await startKubeFixture(t, { pageCap: 2, watchCache: false });
  addNodes(f, 7);
  const log = recordingLogger();
  const client = f.client({ log });
  const order: string[] = [];
  let asked = 0;
  let inFlight = 0;
  let most = 0;
  const api = {
    list: async (...args: Parameters<typeof client.list>) => {
      const n = ++asked;
      order.push(`ask ${n}`);
      most = Math.max(most, ++inFlight);
      try {
        return await client.list(...args);
      } finally {
        inFlight--;
        order.push(`got ${n}`);
      }
    },
    watch: client.watch.bind(client),
    lastAlive: () => client.lastAlive(),
  };
  const informer = new Informer({ api, path: '/api/v1/nodes', decoder: new NodeRecords(P), what: 'node', log });
  void informer.run(f.signal);
  await informer.whenSynced(f.signal);
  assert.equal(informer.size, 7);
  assert.equal(asked, 4, 'four pages of two, no more');
  assert.equal(most, 2, 'one page ahead, never more');
  for (let n = 2; n <= 4; n++) assert.ok(order.indexOf(`ask ${n}`) < order.indexOf(`got ${n - 1}`), `page ${n} asked for before page ${n - 1} was in: ${order.join(', ')}`);
});

test('what the agent wrote before its first list was in: kept where the list predates it, the list\'s where it does not', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('older', { podCIDR: '198.18.1.0/24' });
  f.server.createNode('newer', { podCIDR: '198.18.2.0/24' });
  const older = f.server.getNode('older');
  f.server.updateNode('older', (n) => (n.spec = { podCIDR: '198.18.11.0/24' }));
  const log = recordingLogger();
  const client = f.client({ log });
  let release = (): void => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  t.after(() => release());
  let listed = 0;
  // The list is read at once and its answer held back; the watch never starts, so nothing but the
  // list and observe() reaches the cache.
  const api = {
    list: async (...args: Parameters<typeof client.list>) => {
      const page = await client.list(...args);
      listed++;
      await gate;
      return page;
    },
    watch: async (...args: Parameters<typeof client.watch>) => {
      await new Promise<void>((resolve) => args[2].addEventListener('abort', () => resolve(), { once: true }));
      return client.watch(...args);
    },
    lastAlive: () => client.lastAlive(),
  };
  const informer = new Informer({ api, path: '/api/v1/nodes', decoder: new NodeRecords(P), what: 'node', log });
  void informer.run(f.signal);
  await waitUntil('the list was read', () => listed === 1);
  // Written after the list's snapshot: the list has it as it was.
  const newer = f.server.updateNode('newer', (n) => (n.spec = { podCIDR: '198.18.22.0/24' }));
  assert.equal(informer.observe(newer)?.podCidrs[0], '198.18.22.0/24');
  // An answer older than the list (its object changed since): the list's is the later word.
  informer.observe(older);
  assert.equal(informer.observe({ metadata: {} }), undefined, 'an object without a name is no record');
  assert.equal(informer.synced, false);
  assert.equal(informer.get('newer'), undefined, 'nothing in the cache before the list');
  release();
  await informer.whenSynced(f.signal);
  assert.deepEqual([informer.get('newer')?.podCidrs, informer.get('older')?.podCidrs], [['198.18.22.0/24'], ['198.18.11.0/24']]);
});

test('a clean end of the watch (its timeoutSeconds) resumes from the last resourceVersion without a list', async (t) => {
  const f = await startKubeFixture(t);
  addNodes(f, 3);
  const r = start(f, { watchTimeoutSeconds: 1 });
  await converged(f, r, 'synced');
  await waitUntil('two watches', () => f.server.requests.filter((q) => q.url.includes('watch=true')).length >= 2, 10_000);
  f.server.deleteNode('node-0');
  await converged(f, r, 'deletion seen');
  assert.equal(f.server.requests.filter((q) => !q.url.includes('watch=true')).length, 1, 'one list only');
});

test('410 after a compaction: the relist\'s difference is delivered as changes, unchanged nodes are not', async (t) => {
  const f = await startKubeFixture(t);
  addNodes(f, 4);
  const r = start(f);
  await converged(f, r, 'synced');
  const before = r.batches.length;
  // In one synchronous step, so the client cannot reconnect in between.
  f.server.dropWatches();
  f.server.deleteNode('node-1');
  f.server.updateNode('node-2', (n) => (n.spec = { podCIDR: '198.18.222.0/25' }));
  f.server.compact();
  await converged(f, r, 'converged');
  const after = r.batches.slice(before).flat().map((c) => `${c.type} ${c.record.name}`).sort();
  assert.deepEqual(after, ['delete node-1', 'put node-2']);
});

test('the API server restarted with a change made while it was down: nothing is missed', async (t) => {
  const f = await startKubeFixture(t);
  addNodes(f, 4);
  const r = start(f);
  await converged(f, r, 'synced');
  await f.restart({
    whileDown: (server) => {
      server.deleteNode('node-3');
      server.createNode('late', { podCIDR: '198.18.240.0/25' });
    },
  });
  await converged(f, r, 'converged after the restart');
  assert.equal(r.view.get('late'), '198.18.240.0/25');
});

test('an API server restored from older state (504: too large resourceVersion) is listed from scratch', async (t) => {
  const f = await startKubeFixture(t);
  addNodes(f, 3);
  const old = structuredClone(f.server.store.toJSON());
  addNodes(f, 3, 3);
  const r = start(f);
  await converged(f, r, 'synced');
  assert.equal(r.view.size, 6);
  await f.restart({ state: old });
  await converged(f, r, 'back to the three nodes of the old state');
  assert.equal(r.view.size, 3);
  const lists = f.server.requests.filter((q) => !q.url.includes('watch=true')).map((q) => q.url);
  assert.ok(lists.includes('/api/v1/nodes?limit=500'), `a list of the most recent state, paged: ${lists.join(' ')}`);
});

test('a server that fails every watch soon after opening it gets growing waits, not a list every second', async (t) => {
  const f = await startKubeFixture(t);
  addNodes(f, 2);
  const log = recordingLogger();
  const informer = new Informer({ api: f.client({ log }), path: '/api/v1/nodes', decoder: new NodeRecords(P), what: 'node', log, backoff: { initialMs: 20, maxMs: 100, random: () => 1 } });
  void informer.run(f.signal);
  await informer.whenSynced(f.signal);
  f.server.inject({ on: 'watch', kind: 'gone', times: 5 });
  f.server.dropWatches();
  await waitUntil('five failures', () => log.lines.filter((l) => l.msg === 'node watch expired (410 Gone); listing again').length === 5);
  const waits = log.lines.filter((l) => l.msg === 'node watch expired (410 Gone); listing again').map((l) => l['retryMs']);
  assert.deepEqual(waits, [20, 40, 80, 100, 100], 'each watch opened, yet the backoff kept growing');
});
