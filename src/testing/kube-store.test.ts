/** The in-test API server's store behaves as kube-apiserver's list and watch (backed by etcd) do. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type KubeNode, type KubeObject, KubeStore, type ListResult, NodeStore, type Scope, type StatusError, type StoreEvent, type StoreState, project } from './kube-store.js';

const node = (name: string): KubeNode => ({ metadata: { name }, spec: { podCIDR: '198.18.1.0/24' }, status: {} });

function filled(n: number): NodeStore {
  const store = new NodeStore();
  for (let i = 1; i <= n; i++) store.put(node(`n${i}`));
  return store;
}

const ok = (r: ListResult | StatusError): ListResult => {
  assert.ok(!('code' in r), `expected a list, got ${JSON.stringify(r)}`);
  return r;
};

test('pages follow continue tokens at one snapshot: later writes do not show, remainingItemCount counts down', () => {
  const store = filled(5);
  const first = ok(store.list({ limit: 2 }));
  assert.deepEqual(first.items.map((n) => n.metadata.name), ['n1', 'n2']);
  assert.equal(first.remainingItemCount, 3);
  store.put(node('n0'));
  store.delete('n4');
  const second = ok(store.list({ limit: 2, continue: first.continue! }));
  assert.deepEqual(second.items.map((n) => n.metadata.name), ['n3', 'n4']);
  assert.equal(second.resourceVersion, first.resourceVersion);
  const third = ok(store.list({ limit: 2, continue: second.continue! }));
  assert.deepEqual(third.items.map((n) => n.metadata.name), ['n5']);
  assert.equal(third.continue, undefined);
  assert.equal(ok(store.list({ pageCap: 10 })).items.length, 5, 'the new state: n0 in, n4 out');
});

test('a server may return fewer items than the limit (pageCap), and no limit means everything', () => {
  const store = filled(5);
  assert.equal(ok(store.list({ limit: 500, pageCap: 2 })).items.length, 2);
  assert.equal(ok(store.list({ resourceVersion: '0' })).items.length, 5);
});

test('from a watch cache a list from any version comes whole, its limit ignored; lists from the latest or a given version are still paged', () => {
  const store = filled(5);
  const cached = ok(store.list({ resourceVersion: '0', limit: 2, watchCache: true }));
  assert.deepEqual([cached.items.length, cached.continue, cached.remainingItemCount], [5, undefined, undefined]);
  assert.equal(ok(store.list({ resourceVersion: '0', limit: 2, pageCap: 1, watchCache: true })).items.length, 5);
  assert.equal(ok(store.list({ resourceVersion: '0', limit: 2 })).items.length, 2, '--watch-cache=false: pages');
  assert.equal(ok(store.list({ resourceVersion: '', limit: 2, watchCache: true })).items.length, 2);
  assert.equal(ok(store.list({ resourceVersion: String(store.resourceVersion), limit: 2, watchCache: true })).items.length, 2);
});

test('an expired continue token is 410 Expired; continue with a resourceVersion and a future resourceVersion are refused', () => {
  const store = filled(3);
  const first = ok(store.list({ limit: 1 }));
  store.compact();
  assert.equal((store.list({ continue: first.continue! }) as StatusError).code, 410);
  assert.equal((store.list({ continue: 'garbage' }) as StatusError).code, 400);
  assert.equal((store.list({ limit: 1, continue: ok(store.list({ limit: 1 })).continue!, resourceVersion: '0' }) as StatusError).code, 400);
  const tooLarge = store.list({ resourceVersion: String(store.resourceVersion + 5) }) as StatusError;
  assert.equal(tooLarge.code, 504);
  assert.equal((tooLarge.details?.['causes'] as Array<{ reason: string }>)[0]?.reason, 'ResourceVersionTooLarge');
});

test('watch replay: history after a version, everything as ADDED from 0, 410 before the compaction point', () => {
  const store = filled(2);
  const rv = String(store.resourceVersion);
  store.put(node('n3'));
  store.put({ ...node('n1'), spec: { podCIDR: '198.18.9.0/24' } });
  store.delete('n2');
  const replay = store.replay(rv);
  assert.ok(Array.isArray(replay));
  assert.deepEqual(replay.map((e) => `${e.type} ${e.node.metadata.name}`), ['ADDED n3', 'MODIFIED n1', 'DELETED n2']);
  const all = store.replay('0');
  assert.ok(Array.isArray(all));
  assert.deepEqual(all.map((e) => e.node.metadata.name).sort(), ['n1', 'n3']);
  store.compact();
  assert.equal((store.replay(rv) as StatusError).code, 410);
});

test('a restarted store keeps nodes and resourceVersion; watches from before the restart get 410', () => {
  const store = filled(2);
  const rv = String(store.resourceVersion - 1);
  const again = new NodeStore(JSON.parse(JSON.stringify(store.toJSON())) as { rv: number; nodes: KubeNode[] });
  assert.equal(again.resourceVersion, store.resourceVersion);
  assert.equal(again.size, 2);
  assert.equal((again.replay(rv) as StatusError).code, 410);
  again.put(node('n3'));
  assert.equal(again.resourceVersion, store.resourceVersion + 1);
});

const pod = (ns: string, name: string, nodeName: string): KubeObject => ({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: ns, name }, spec: { nodeName } });
const onNode1: Scope = { matches: (o) => (o['spec'] as { nodeName?: string }).nodeName === 'node1' };

test('one resourceVersion across kinds; a list or a watch of one kind sees that kind only, in namespace-then-name order', () => {
  const store = new KubeStore();
  const versions = [
    store.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }),
    store.put(pod('x', 'b', 'node1')),
    store.put({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: 'x', name: 'p' } }),
    store.put(pod('a-b', 'z', 'node1')),
  ].map((o) => Number(o.metadata.resourceVersion));
  assert.deepEqual(versions, [101, 102, 103, 104]);
  const pods = ok(store.list('Pod', {}));
  assert.equal(pods.resourceVersion, '104');
  assert.deepEqual(pods.items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`), ['a-b/z', 'x/b']);
  assert.deepEqual(ok(store.list('Pod', {}, { namespace: 'x' })).items.map((o) => o.metadata.name), ['b']);
  const replay = store.replay('Pod', '101');
  assert.ok(Array.isArray(replay));
  assert.deepEqual(replay.map((e) => e.rv), [102, 104]);
});

test('a watch narrowed by a selector: an object that stops matching is DELETED (its previous state at the new version), one that starts is ADDED', () => {
  const store = new KubeStore();
  store.put(pod('x', 'a', 'node1'));
  store.put(pod('x', 'b', 'node2'));
  const from = String(store.resourceVersion);
  const live: StoreEvent[] = [];
  store.subscribe((e) => {
    const seen = project(e, 'Pod', onNode1);
    if (seen) live.push(seen);
  });
  store.put(pod('x', 'b', 'node2')); // neither before nor after: nothing
  store.put(pod('x', 'a', 'node2'));
  store.put(pod('x', 'b', 'node1'));
  store.put(pod('x', 'b', 'node1'));
  store.delete('Pod', 'x', 'b');
  const replay = store.replay('Pod', from, onNode1);
  assert.ok(Array.isArray(replay));
  for (const events of [live, replay]) {
    assert.deepEqual(events.map((e) => `${e.type} ${e.object.metadata.name} ${(e.object['spec'] as { nodeName: string }).nodeName} ${e.object.metadata.resourceVersion}`), [
      'DELETED a node1 104',
      'ADDED b node1 105',
      'MODIFIED b node1 106',
      'DELETED b node1 107',
    ]);
  }
  assert.deepEqual(ok(store.list('Pod', {}, onNode1)).items, [], 'a list with the selector agrees');
  assert.equal(ok(store.list('Pod', { limit: 1 }, onNode1)).remainingItemCount, undefined);
});

test('the state holds every kind; a state of nodes only ({rv, nodes}, as older tests write it) still loads', () => {
  const store = filled(1);
  store.objects.put(pod('x', 'a', 'n1'));
  const again = new KubeStore(JSON.parse(JSON.stringify(store.toJSON())) as StoreState);
  assert.equal(again.resourceVersion, store.resourceVersion);
  assert.equal(again.get('Pod', 'x', 'a')?.metadata.resourceVersion, String(store.resourceVersion));
  assert.equal(again.get('Node', '', 'n1')?.kind, 'Node');
  const legacy = new NodeStore({ rv: 7, nodes: [node('old')] });
  assert.equal(legacy.get('old')?.apiVersion, 'v1');
  assert.equal(legacy.objects.count('Pod'), 0);
  assert.equal(legacy.put(node('new')).metadata.resourceVersion, '8');
});
