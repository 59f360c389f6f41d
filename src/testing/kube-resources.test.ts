/**
 * The in-test API server's Namespaces, Pods and NetworkPolicies over HTTPS, as a policy agent and
 * an admin use them: selectors on lists and watches, defaulting and validation, RBAC, one
 * resourceVersion across kinds, bookmarks, state across restarts, and the admin methods.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { request } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { createInterface } from 'node:readline';
import { type KubeFixture, agentUser, startKubeFixture } from './kube-fixture.js';
import type { KubeObject } from './kube-store.js';

type Json = Record<string, unknown>;
type TestContext = { after(fn: () => Promise<void> | void): void };

interface Answer {
  readonly status: number;
  readonly body: Json & { metadata?: Json; items?: KubeObject[]; details?: Json };
}

async function open(f: KubeFixture, method: string, path: string, options: { as?: 'admin' | 'agent'; body?: unknown; contentType?: string }): Promise<IncomingMessage> {
  const ca = await f.ca.read(f.ca.caFile);
  const tls = options.as === 'agent' ? {} : { cert: await f.ca.read(f.ca.clientCert), key: await f.ca.read(f.ca.clientKey) };
  const headers = {
    ...(options.as === 'agent' ? { authorization: `Bearer ${await readFile(f.tokenFile, 'utf8')}` } : {}),
    ...(options.body !== undefined ? { 'content-type': options.contentType ?? 'application/json' } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, f.url), { method, ca, ...tls, headers }, resolve);
    req.once('error', reject);
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

/** One request, as the admin (client certificate) unless `as: 'agent'` (the agent's token). */
async function call(f: KubeFixture, method: string, path: string, options: { as?: 'admin' | 'agent'; body?: unknown; contentType?: string } = {}): Promise<Answer> {
  const res = await open(f, method, path, options);
  let text = '';
  for await (const chunk of res) text += String(chunk);
  return { status: res.statusCode ?? 0, body: JSON.parse(text) as Answer['body'] };
}

/** A watch's events, one per `next()`. */
async function watch(t: TestContext, f: KubeFixture, path: string): Promise<() => Promise<{ type: string; object: KubeObject }>> {
  const res = await open(f, 'GET', path, { as: 'agent' });
  assert.equal(res.statusCode, 200, path);
  t.after(() => void res.destroy());
  const lines = createInterface({ input: res })[Symbol.asyncIterator]();
  return async () => JSON.parse(String((await lines.next()).value)) as { type: string; object: KubeObject };
}

const names = (a: Answer): string[] => (a.body.items ?? []).map((o) => `${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`);
const describe = (e: { type: string; object: KubeObject }): string => `${e.type} ${e.object.metadata.namespace}/${e.object.metadata.name}`;
const q = encodeURIComponent;

function pod(ns: string, name: string, nodeName: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { namespace: ns, name, labels }, spec: { nodeName, containers: [{ name: 'c', ports: [{ name: 'serve-80-tcp', containerPort: 80 }] }] }, status: { phase: 'Running', podIP: '198.18.1.5', podIPs: [{ ip: '198.18.1.5' }] } };
}

const netpol = (ns: string, name: string, spec: Json): KubeObject => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: ns, name }, spec });
const netpols = (ns: string): string => `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies`;

test('pods by spec.nodeName: lists and watches see the node\'s pods only; a pod moved off the node is DELETED to the watch, one moved onto it ADDED', { timeout: 20_000 }, async (t) => {
  const f = await startKubeFixture(t);
  f.server.apply(pod('x', 'a', 'node1'));
  f.server.apply(pod('x', 'b', 'node2'));
  f.server.apply(pod('y', 'c', 'node1'));
  const selector = `fieldSelector=${q('spec.nodeName=node1')}`;
  const list = await call(f, 'GET', `/api/v1/pods?${selector}`, { as: 'agent' });
  assert.equal(list.body['kind'], 'PodList');
  assert.deepEqual(names(list), ['x/a', 'y/c']);
  assert.deepEqual(names(await call(f, 'GET', `/api/v1/namespaces/x/pods?${selector}`, { as: 'agent' })), ['x/a']);
  assert.deepEqual(names(await call(f, 'GET', `/api/v1/pods?fieldSelector=${q('spec.nodeName!=node1,metadata.namespace=x')}`, { as: 'agent' })), ['x/b']);
  assert.equal((await call(f, 'GET', `/api/v1/pods?fieldSelector=${q('spec.nodeNmae=node1')}`, { as: 'agent' })).status, 400, 'a field kube-apiserver does not index');

  const from = String(list.body.metadata!['resourceVersion']);
  const next = await watch(t, f, `/api/v1/pods?watch=true&${selector}&resourceVersion=${from}`);
  f.server.apply(pod('x', 'b', 'node2', { seen: 'no' }));
  f.server.apply(pod('x', 'a', 'node2'));
  const off = await next();
  assert.equal(describe(off), 'DELETED x/a', 'the change of x/b on node2 was not sent');
  assert.equal((off.object['spec'] as Json)['nodeName'], 'node1', 'the state it was last seen in');
  assert.equal(off.object.metadata.resourceVersion, String(f.server.objects.resourceVersion));
  f.server.apply(pod('x', 'b', 'node1'));
  assert.equal(describe(await next()), 'ADDED x/b');
  f.server.apply(pod('y', 'c', 'node1', { changed: 'yes' }));
  assert.equal(describe(await next()), 'MODIFIED y/c');
  f.server.remove('Pod', 'y', 'c');
  assert.equal(describe(await next()), 'DELETED y/c');

  const replay = await watch(t, f, `/api/v1/namespaces/x/pods?watch=true&${selector}&resourceVersion=${from}`);
  assert.deepEqual([describe(await replay()), describe(await replay())], ['DELETED x/a', 'ADDED x/b'], 'history replayed through the same filter, in namespace x');
  const fresh = await watch(t, f, `/api/v1/pods?watch=true&${selector}`);
  assert.equal(describe(await fresh()), 'ADDED x/b', 'a watch from now starts with what matches');
});

test('labelSelector on lists and watches of every kind, as kube-apiserver parses it', { timeout: 20_000 }, async (t) => {
  const f = await startKubeFixture(t);
  f.server.apply(pod('x', 'a', 'n1', { app: 'web', tier: 'front' }));
  f.server.apply(pod('x', 'b', 'n1', { app: 'db', tier: 'back' }));
  f.server.apply(pod('x', 'c', 'n1', { app: 'web' }));
  f.server.apply(pod('x', 'd', 'n1'));
  const pods = async (selector: string): Promise<string[]> => names(await call(f, 'GET', `/api/v1/namespaces/x/pods?labelSelector=${q(selector)}`, { as: 'agent' })).map((n) => n.slice(2));
  assert.deepEqual(await pods('app=web'), ['a', 'c']);
  assert.deepEqual(await pods('app==web'), ['a', 'c']);
  assert.deepEqual(await pods('app!=web'), ['b', 'd']);
  assert.deepEqual(await pods('app in (db,cache)'), ['b']);
  assert.deepEqual(await pods('app notin (web)'), ['b', 'd']);
  assert.deepEqual(await pods('tier'), ['a', 'b']);
  assert.deepEqual(await pods('!tier'), ['c', 'd']);
  assert.deepEqual(await pods('app=web,!tier'), ['c']);
  const bad = await call(f, 'GET', `/api/v1/pods?labelSelector=${q('app in web')}`, { as: 'agent' });
  assert.equal(bad.status, 400);
  assert.equal(bad.body['reason'], 'BadRequest');

  for (const ns of ['x', 'y', 'z']) f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { team: ns === 'z' ? 'b' : 'a' } } });
  assert.deepEqual(names(await call(f, 'GET', `/api/v1/namespaces?labelSelector=${q('kubernetes.io/metadata.name in (x,z)')}`, { as: 'agent' })), ['x', 'z']);
  f.server.createNode('n1');
  f.server.updateNode('n1', (n) => (n.metadata.labels = { 'node-role.kubernetes.io/control-plane': '' }));
  f.server.createNode('n2');
  assert.deepEqual(names(await call(f, 'GET', `/api/v1/nodes?labelSelector=${q('!node-role.kubernetes.io/control-plane')}`, { as: 'agent' })), ['n2']);

  const next = await watch(t, f, `/api/v1/namespaces?watch=true&labelSelector=${q('team=a')}&resourceVersion=${f.server.objects.resourceVersion}`);
  f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x', labels: { team: 'b' } } });
  const relabelled = await next();
  assert.deepEqual([relabelled.type, relabelled.object.metadata.name, relabelled.object.metadata.labels?.['team']], ['DELETED', 'x', 'a']);
  f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'z', labels: { team: 'a' } } });
  const joined = await next();
  assert.deepEqual([joined.type, joined.object.metadata.name], ['ADDED', 'z']);
});

test('NetworkPolicy defaulting: each port\'s protocol TCP; policyTypes Ingress, plus Egress iff there are egress rules; what is given is kept', async (t) => {
  const f = await startKubeFixture(t);
  const create = (name: string, spec: Json): Promise<Answer> => call(f, 'POST', netpols('x'), { body: netpol('x', name, spec) });
  const ingress = await create('ingress', { podSelector: {}, ingress: [{ ports: [{ port: 80 }, { port: 53, protocol: 'UDP' }] }] });
  assert.equal(ingress.status, 201);
  const spec = ingress.body['spec'] as { policyTypes: string[]; ingress: Array<{ ports: Json[] }> };
  assert.deepEqual(spec.policyTypes, ['Ingress']);
  assert.deepEqual(spec.ingress[0]!.ports, [{ port: 80, protocol: 'TCP' }, { port: 53, protocol: 'UDP' }]);
  const both = await create('both', { podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: '198.18.0.0/15', except: ['198.18.1.0/24'] } }], ports: [{ port: 443, endPort: 445 }] }] });
  assert.deepEqual((both.body['spec'] as Json)['policyTypes'], ['Ingress', 'Egress']);
  assert.equal(((both.body['spec'] as { egress: Array<{ ports: Json[] }> }).egress[0]!.ports[0]!)['protocol'], 'TCP');
  assert.deepEqual((((await create('egress', { podSelector: {}, policyTypes: ['Egress'], egress: [{}] })).body['spec']) as Json)['policyTypes'], ['Egress']);
  const bare = await create('bare', { egress: [] });
  assert.deepEqual(bare.body['spec'], { podSelector: {}, egress: [], policyTypes: ['Ingress'] }, 'an empty egress list is no egress; podSelector always there');
  const applied = f.server.apply(netpol('x', 'applied', { podSelector: {}, ingress: [{ ports: [{ port: 'serve-80-tcp' }] }] }));
  assert.deepEqual(applied['spec'], { podSelector: {}, ingress: [{ ports: [{ port: 'serve-80-tcp', protocol: 'TCP' }] }], policyTypes: ['Ingress'] });
  const listed = await call(f, 'GET', '/apis/networking.k8s.io/v1/networkpolicies', { as: 'agent' });
  assert.equal(listed.body['kind'], 'NetworkPolicyList');
  assert.equal(listed.body['apiVersion'], 'networking.k8s.io/v1');
  assert.deepEqual(names(listed), ['x/applied', 'x/bare', 'x/both', 'x/egress', 'x/ingress']);
});

test('NetworkPolicy validation: 422 Invalid with the field of each error, and nothing stored', async (t) => {
  const f = await startKubeFixture(t);
  const cases: Array<[Json, string[]]> = [
    [{ podSelector: {}, ingress: [{ ports: [{ port: 'http', endPort: 90 }] }] }, ['spec.ingress[0].ports[0].endPort']],
    [{ podSelector: {}, ingress: [{ ports: [{ port: 90, endPort: 80 }] }] }, ['spec.ingress[0].ports[0].endPort']],
    [{ podSelector: {}, egress: [{ ports: [{ endPort: 80 }] }] }, ['spec.egress[0].ports[0].endPort']],
    [{ podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '198.18.0.0/15' }, podSelector: {} }] }] }, ['spec.ingress[0].from[0]']],
    [{ podSelector: {}, ingress: [{ from: [{}] }] }, ['spec.ingress[0].from[0]']],
    [{ podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: '198.18.0.0/16', except: ['198.51.100.0/24'] } }] }] }, ['spec.egress[0].to[0].ipBlock.except[0]']],
    [{ podSelector: { matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }, ingress: [{ ports: [{ port: 80, protocol: 'ICMP' }] }] }, ['spec.podSelector.matchExpressions[0].values', 'spec.ingress[0].ports[0].protocol']],
    [{ podSelector: {}, policyTypes: ['Ingress', 'Sideways'] }, ['spec.policyTypes[1]']],
  ];
  for (const [spec, fields] of cases) {
    const refused = await call(f, 'POST', netpols('x'), { body: netpol('x', 'p', spec) });
    assert.equal(refused.status, 422, JSON.stringify(spec));
    assert.equal(refused.body['reason'], 'Invalid');
    assert.deepEqual((refused.body.details!['causes'] as Array<{ field: string }>).map((c) => c.field), fields, JSON.stringify(spec));
  }
  assert.throws(() => f.server.apply(netpol('x', 'p', cases[0]![0])), /NetworkPolicy.networking.k8s.io "p" is invalid/);
  assert.deepEqual(names(await call(f, 'GET', netpols('x'))), []);
  const created = await call(f, 'POST', netpols('x'), { body: netpol('x', 'p', { podSelector: {} }) });
  const stale = { ...created.body, metadata: { ...created.body.metadata, resourceVersion: '1' }, spec: { podSelector: {}, ingress: [{ ports: [{ port: 'http', endPort: 90 }] }] } };
  assert.equal((await call(f, 'PUT', `${netpols('x')}/p`, { body: stale })).status, 409, 'a stale resourceVersion conflicts');
  const invalidUpdate = await call(f, 'PUT', `${netpols('x')}/p`, { body: { ...stale, metadata: created.body.metadata } });
  assert.equal(invalidUpdate.status, 422, 'updates are validated too');
  assert.equal((await call(f, 'POST', netpols('x'), { body: netpol('x', 'p', { podSelector: {} }) })).status, 409, 'already exists');
});

test('a Namespace gets the immutable label kubernetes.io/metadata.name=<name> on create, and keeps it through updates', async (t) => {
  const f = await startKubeFixture(t);
  const created = await call(f, 'POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x', labels: { team: 'a' } } } });
  assert.equal(created.status, 201);
  assert.deepEqual(created.body.metadata!['labels'], { team: 'a', 'kubernetes.io/metadata.name': 'x' });
  assert.equal((created.body['status'] as Json)['phase'], 'Active');
  const replaced = await call(f, 'PUT', '/api/v1/namespaces/x', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x', labels: { team: 'b' } } } });
  assert.deepEqual(replaced.body.metadata!['labels'], { team: 'b', 'kubernetes.io/metadata.name': 'x' });
  assert.equal(replaced.body.metadata!['uid'], created.body.metadata!['uid']);
  const patched = await call(f, 'PATCH', '/api/v1/namespaces/x', { body: { metadata: { labels: { 'kubernetes.io/metadata.name': 'y' } } }, contentType: 'application/merge-patch+json' });
  assert.equal(patched.status, 200);
  assert.deepEqual(f.server.getObject('Namespace', '', 'x').metadata.labels, { team: 'b', 'kubernetes.io/metadata.name': 'x' });
  assert.deepEqual(f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'z' } }).metadata.labels, { 'kubernetes.io/metadata.name': 'z' });
  assert.equal((await call(f, 'POST', '/api/v1/namespaces', { body: { metadata: { name: 'Not_A_Label' } } })).status, 422);
});

test('the agent may get, list and watch pods, namespaces and networkpolicies; any write is 403 in kube-apiserver\'s words', async (t) => {
  const f = await startKubeFixture(t);
  f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } });
  f.server.apply(pod('x', 'a', 'n1'));
  f.server.apply(netpol('x', 'p', { podSelector: {} }));
  for (const path of ['/api/v1/pods', '/api/v1/namespaces/x/pods/a', '/api/v1/namespaces', '/api/v1/namespaces/x', netpols('x'), `${netpols('x')}/p`, '/apis/networking.k8s.io/v1/networkpolicies']) {
    assert.equal((await call(f, 'GET', path, { as: 'agent' })).status, 200, path);
  }
  const create = await call(f, 'POST', '/api/v1/namespaces/x/pods', { as: 'agent', body: pod('x', 'b', 'n1') });
  assert.equal(create.status, 403);
  assert.equal(create.body['reason'], 'Forbidden');
  assert.equal(create.body['message'], `pods is forbidden: User "${agentUser}" cannot create resource "pods" in API group "" in the namespace "x"`);
  const del = await call(f, 'DELETE', `${netpols('x')}/p`, { as: 'agent' });
  assert.equal(del.body['message'], `networkpolicies.networking.k8s.io "p" is forbidden: User "${agentUser}" cannot delete resource "networkpolicies" in API group "networking.k8s.io" in the namespace "x"`);
  const patch = await call(f, 'PATCH', '/api/v1/namespaces/x', { as: 'agent', body: { metadata: { labels: { a: 'b' } } }, contentType: 'application/merge-patch+json' });
  assert.equal(patch.body['message'], `namespaces "x" is forbidden: User "${agentUser}" cannot patch resource "namespaces" in API group "" at the cluster scope`);
  const update = await call(f, 'PUT', '/api/v1/namespaces/x/pods/a', { as: 'agent', body: pod('x', 'a', 'n2') });
  assert.equal(update.status, 403);
  assert.equal(f.server.objects.count('Pod'), 1);
  assert.equal((f.server.getObject('Pod', 'x', 'a')['spec'] as Json)['nodeName'], 'n1');
  assert.ok(f.server.getObject('NetworkPolicy', 'x', 'p'));
  assert.equal(f.server.getObject('Namespace', '', 'x').metadata.labels?.['a'], undefined);
});

test('one resourceVersion across kinds, as etcd\'s revision: lists of each kind are at it, and a watch of one kind from an older version replays its kind only', { timeout: 20_000 }, async (t) => {
  const f = await startKubeFixture(t);
  const start = f.server.objects.resourceVersion;
  const writes = [
    f.server.createNode('n1'),
    f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }),
    f.server.apply(pod('x', 'a', 'n1')),
    f.server.apply(netpol('x', 'p', { podSelector: {} })),
    f.server.apply(pod('x', 'b', 'n1')),
  ];
  assert.deepEqual(writes.map((o) => Number(o.metadata.resourceVersion)), [1, 2, 3, 4, 5].map((i) => start + i));
  for (const path of ['/api/v1/nodes', '/api/v1/namespaces', '/api/v1/pods', '/apis/networking.k8s.io/v1/networkpolicies']) {
    assert.equal((await call(f, 'GET', path, { as: 'agent' })).body.metadata!['resourceVersion'], String(start + 5), path);
  }
  const next = await watch(t, f, `/api/v1/pods?watch=true&resourceVersion=${start + 1}`);
  assert.deepEqual([describe(await next()), describe(await next())], ['ADDED x/a', 'ADDED x/b']);
  assert.equal((await call(f, 'GET', `/apis/networking.k8s.io/v1/networkpolicies?resourceVersion=${start + 9}`, { as: 'agent' })).status, 504, 'a version the cluster has not reached');
});

test('bookmarks carry the watched kind and apiVersion, at the cluster\'s resourceVersion', { timeout: 20_000 }, async (t) => {
  const f = await startKubeFixture(t);
  f.server.apply(netpol('x', 'p', { podSelector: {} }));
  const rv = f.server.objects.resourceVersion;
  const policies = await watch(t, f, `${netpols('x')}?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`);
  const namespaces = await watch(t, f, `/api/v1/namespaces?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`);
  const pods = await watch(t, f, `/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`);
  f.server.bookmark();
  assert.deepEqual(await policies(), { type: 'BOOKMARK', object: { kind: 'NetworkPolicy', apiVersion: 'networking.k8s.io/v1', metadata: { resourceVersion: String(rv) } } });
  assert.deepEqual(await namespaces(), { type: 'BOOKMARK', object: { kind: 'Namespace', apiVersion: 'v1', metadata: { resourceVersion: String(rv) } } });
  assert.deepEqual(await pods(), { type: 'BOOKMARK', object: { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: String(rv) } } });
});

test('a restarted server keeps every kind and the resourceVersion; a state of nodes only still loads', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('n1');
  f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } });
  f.server.apply(pod('x', 'a', 'n1'));
  const policy = f.server.apply(netpol('x', 'p', { podSelector: {} }));
  const rv = f.server.objects.resourceVersion;
  await f.restart();
  assert.equal(f.server.objects.resourceVersion, rv);
  assert.deepEqual((await call(f, 'GET', `${netpols('x')}/p`, { as: 'agent' })).body, policy);
  assert.deepEqual(names(await call(f, 'GET', '/api/v1/pods', { as: 'agent' })), ['x/a']);
  assert.equal(f.server.apply(pod('x', 'b', 'n1')).metadata.resourceVersion, String(rv + 1));
  await f.restart({ state: { rv: 50, nodes: [{ metadata: { name: 'old' }, spec: {}, status: {} }] } });
  assert.deepEqual(names(await call(f, 'GET', '/api/v1/nodes', { as: 'agent' })), ['old']);
  assert.deepEqual(names(await call(f, 'GET', '/api/v1/pods', { as: 'agent' })), []);
});

test('apply creates or replaces (uid and creation time kept), remove deletes, a Namespace with what is in it; both refuse what they cannot do', { timeout: 20_000 }, async (t) => {
  const f = await startKubeFixture(t);
  const first = f.server.apply(pod('x', 'a', 'n1', { v: '1' }));
  const again = f.server.apply(pod('x', 'a', 'n1', { v: '2' }));
  assert.equal(again.metadata.uid, first.metadata.uid);
  assert.equal(again.metadata.creationTimestamp, first.metadata.creationTimestamp);
  assert.equal(Number(again.metadata.resourceVersion), Number(first.metadata.resourceVersion) + 1);
  assert.deepEqual(f.server.getObject('Pod', 'x', 'a').metadata.labels, { v: '2' });
  f.server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } });
  f.server.apply(netpol('x', 'p', { podSelector: {} }));
  f.server.apply(pod('y', 'b', 'n1'));
  const next = await watch(t, f, `/api/v1/pods?watch=true&resourceVersion=${f.server.objects.resourceVersion}`);
  f.server.remove('Namespace', '', 'x');
  assert.equal(describe(await next()), 'DELETED x/a');
  assert.throws(() => f.server.getObject('NetworkPolicy', 'x', 'p'), /no NetworkPolicy/);
  assert.deepEqual(names(await call(f, 'GET', '/api/v1/pods', { as: 'agent' })), ['y/b']);
  assert.throws(() => f.server.remove('Pod', 'y', 'nope'), /no Pod y\/nope/);
  assert.throws(() => f.server.apply({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'y' } }), /not an object the server keeps/);
  assert.throws(() => f.server.apply({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'nons' }, spec: { containers: [{ name: 'c' }] } }), /metadata.namespace: Required value/);
});

test('patches: strategic merge merges containers by name and honours $patch: delete; a JSON merge patch replaces the list; dryRun stores nothing', async (t) => {
  const f = await startKubeFixture(t);
  const base: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { namespace: 'x', name: 'a' }, spec: { containers: [{ name: 'a', image: 'i1', ports: [{ containerPort: 80 }] }, { name: 'b', image: 'i2' }] } };
  assert.equal((await call(f, 'POST', '/api/v1/namespaces/x/pods', { body: base })).status, 201);
  const path = '/api/v1/namespaces/x/pods/a';
  const images = (): string[] => ((f.server.getObject('Pod', 'x', 'a')['spec'] as { containers: Array<{ name: string; image: string }> }).containers).map((c) => `${c.name}=${c.image}`);
  const strategic = { contentType: 'application/strategic-merge-patch+json' };
  await call(f, 'PATCH', path, { ...strategic, body: { spec: { containers: [{ name: 'b', image: 'i3' }] } } });
  assert.deepEqual(images(), ['a=i1', 'b=i3']);
  await call(f, 'PATCH', path, { ...strategic, body: { spec: { containers: [{ name: 'a', ports: [{ containerPort: 81 }] }] } } });
  assert.deepEqual((f.server.getObject('Pod', 'x', 'a')['spec'] as { containers: Array<{ ports?: Json[] }> }).containers[0]!.ports, [{ containerPort: 80, protocol: 'TCP' }, { containerPort: 81, protocol: 'TCP' }]);
  await call(f, 'PATCH', path, { ...strategic, body: { spec: { containers: [{ name: 'a', $patch: 'delete' }] } } });
  assert.deepEqual(images(), ['b=i3']);
  await call(f, 'PATCH', path, { contentType: 'application/merge-patch+json', body: { spec: { containers: [{ name: 'c', image: 'i4' }] } } });
  assert.deepEqual(images(), ['c=i4']);
  assert.equal((await call(f, 'PATCH', path, { contentType: 'application/json-patch+json', body: [] })).status, 415);
  const rv = f.server.objects.resourceVersion;
  const dry = await call(f, 'POST', '/api/v1/namespaces/x/pods?dryRun=All', { body: { ...base, metadata: { namespace: 'x', name: 'dry' } } });
  assert.equal(dry.status, 201);
  assert.equal(f.server.objects.resourceVersion, rv);
  assert.equal((await call(f, 'GET', '/api/v1/namespaces/x/pods/dry')).status, 404);
});

test('discovery lists namespaces, pods and the networking.k8s.io group with networkpolicies (netpol)', async (t) => {
  const f = await startKubeFixture(t);
  const core = (await call(f, 'GET', '/api/v1', { as: 'agent' })).body['resources'] as Array<{ name: string; namespaced: boolean; kind: string }>;
  assert.deepEqual(core.filter((r) => !r.name.includes('/')).map((r) => `${r.name} ${r.kind} ${r.namespaced}`), ['nodes Node false', 'namespaces Namespace false', 'pods Pod true']);
  const groups = (await call(f, 'GET', '/apis', { as: 'agent' })).body['groups'] as Array<{ name: string; preferredVersion: { groupVersion: string } }>;
  assert.deepEqual(groups.map((g) => `${g.name} ${g.preferredVersion.groupVersion}`), ['networking.k8s.io networking.k8s.io/v1']);
  const networking = (await call(f, 'GET', '/apis/networking.k8s.io/v1', { as: 'agent' })).body['resources'] as Array<Json>;
  assert.deepEqual(networking.map((r) => [r['name'], r['kind'], r['namespaced'], r['shortNames']]), [['networkpolicies', 'NetworkPolicy', true, ['netpol']]]);
});
