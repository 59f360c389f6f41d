/** The Kubernetes subnet manager against the in-test API server over TLS, through weft's own client. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeManager } from './kube-manager.js';
import { type KubeFixture, startKubeFixture } from '../../testing/kube-fixture.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import { followPeers } from '../../testing/peer-view.js';
import { waitUntil } from '../../testing/wait.js';
import { parseIp } from '../../ip/ip.js';
import { isWeftError } from '../../core/errors.js';
import { subscribe } from '../../core/events.js';

const P = 'flannel.alpha.coreos.com/';
const netConf = '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}';
const vxlanAttrs = (n: number) => ({ publicIp: parseIp(`203.0.113.${n}`), backendType: 'vxlan', backendData: `{"VNI":1,"VtepMAC":"0e:00:00:00:00:0${n}"}` });
const peerAnnotations = (n: number): Record<string, string> => ({
  [`${P}kube-subnet-manager`]: 'true',
  [`${P}backend-type`]: 'vxlan',
  [`${P}backend-data`]: `{"VNI":1,"VtepMAC":"0e:00:00:00:00:0${n}"}`,
  [`${P}public-ip`]: `203.0.113.${n}`,
});

type TestContext = { after(fn: () => Promise<void> | void): void };

async function setup(t: TestContext) {
  const f = await startKubeFixture(t);
  const manager = (nodeName: string | { podName: string; podNamespace: string }, log = recordingLogger(), conf = netConf) => {
    const m = new KubeManager({
      client: f.client({ log, requestTimeoutMs: 500 }),
      ...(typeof nodeName === 'string' ? { nodeName } : nodeName),
      netConf: conf,
      annotationPrefix: 'flannel.alpha.coreos.com',
      log,
      informer: { backoff: { initialMs: 20, maxMs: 100 } },
      retry: { initialMs: 20, maxMs: 100 },
    });
    void m.run(f.signal);
    return m;
  };
  return { f, manager, signal: f.signal };
}

const requests = (f: KubeFixture, what: 'list' | 'watch' | 'get' | 'patch'): number =>
  f.server.requests.filter((r) => {
    const watch = r.url.includes('watch=true');
    if (what === 'patch') return r.method === 'PATCH';
    if (what === 'watch') return watch;
    if (what === 'list') return r.method === 'GET' && r.url.startsWith('/api/v1/nodes?') && !watch;
    return r.method === 'GET' && /^\/api\/v1\/nodes\/[^?]+$/.test(r.url);
  }).length;

test('the lease is the node\'s podCIDR, waited for (node and podCIDR), and the annotations are flanneld\'s', async (t) => {
  const { f, manager, signal } = await setup(t);
  const log = recordingLogger();
  const m = manager('n1', log);
  const acquiring = m.acquireLease(vxlanAttrs(1), signal);
  await waitUntil('the wait for the node is logged', () => log.lines.some((l) => l.msg === 'waiting for node "n1" to be registered'));
  f.server.createNode('n1', {});
  await waitUntil('the wait for the podCIDR is logged', () => log.lines.some((l) => l.msg === 'waiting for node "n1" to be assigned a podCIDR'));
  f.server.updateNode('n1', (n) => (n.spec = { podCIDR: '198.18.7.0/24', podCIDRs: ['198.18.7.0/24'] }));
  const lease = await acquiring;
  assert.equal(lease.subnet.ipv4?.ip.value, parseIp('198.18.7.0').value);
  assert.equal(log.lines.filter((l) => l.level === 'warn' && l.msg.startsWith('could not read node')).length, 0, 'a GET answered 404 (not registered yet) is no failure');
  const a = f.server.getNode('n1').metadata.annotations!;
  assert.equal(a[`${P}kube-subnet-manager`], 'true');
  assert.equal(a[`${P}backend-type`], 'vxlan');
  assert.equal(a[`${P}backend-data`], '{"VNI":1,"VtepMAC":"0e:00:00:00:00:01"}');
  assert.equal(a[`${P}public-ip`], '203.0.113.1');
  assert.equal(a['node.alpha.kubernetes.io/ttl'], '0', 'other annotations are kept');
  const patch = f.server.requests.find((r) => r.method === 'PATCH');
  assert.equal(patch?.url, '/api/v1/nodes/n1/status');
  assert.equal(patch?.contentType, 'application/strategic-merge-patch+json');
  await m.networkUp(signal);
  assert.deepEqual(f.server.getNode('n1').status.conditions?.map((c) => [c['type'], c['status'], c['reason']]), [['NetworkUnavailable', 'False', 'FlannelIsUp']]);
  await waitUntil('the informer has the published node', async () => (await m.checkLease()).held);
  // A restarted agent finds what it published, to recreate its vxlan device with the same MAC.
  const previous = await manager('n1').previousAttrs(parseIp('203.0.113.1'), signal);
  assert.equal(previous?.backendData, '{"VNI":1,"VtepMAC":"0e:00:00:00:00:01"}');
  assert.equal(previous?.backendType, 'vxlan', 'and which backend made its devices (leftovers.ts)');
});

test('public-ip-overwrite is published instead of the detected address; a podCIDR outside the network is an error', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('n1', { podCIDR: '198.18.3.0/24' }, { [`${P}public-ip-overwrite`]: '198.51.100.9' });
  const lease = await manager('n1').acquireLease(vxlanAttrs(1), signal);
  assert.equal(f.server.getNode('n1').metadata.annotations![`${P}public-ip`], '198.51.100.9');
  assert.equal(lease.attrs.publicIp?.value, parseIp('198.51.100.9').value);
  f.server.createNode('n2', { podCIDR: '203.0.113.0/24' });
  await assert.rejects(manager('n2').acquireLease(vxlanAttrs(2), signal), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /doesn't contain "203\.0\.113\.0\/24" PodCIDR of the "n2" node/.test(err.message));
});

test('dual-stack and IPv6-only: both podCIDRs, the IPv6 annotations as flanneld writes them, an IPv6 podCIDR outside IPv6Network refused', async (t) => {
  const { f, manager, signal } = await setup(t);
  const dual = '{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}';
  const v6Data = (n: number) => `{"VNI":1,"VtepMAC":"0e:00:00:00:06:0${n}"}`;
  const dualAttrs = (n: number) => ({ ...vxlanAttrs(n), publicIpv6: parseIp(`2001:db8:113::${n}`), backendV6Data: v6Data(n) });
  f.server.createNode('n1', { podCIDR: '198.18.1.0/24', podCIDRs: ['198.18.1.0/24', '2001:db8:1800:1::/64'] });
  const lease = await manager('n1', recordingLogger(), dual).acquireLease(dualAttrs(1), signal);
  assert.equal(lease.subnet.ipv6?.ip.value, parseIp('2001:db8:1800:1::').value);
  const a = f.server.getNode('n1').metadata.annotations!;
  assert.equal(a[`${P}public-ipv6`], '2001:db8:113::1');
  assert.equal(a[`${P}backend-v6-data`], v6Data(1));
  assert.equal(a[`${P}backend-data`], '{"VNI":1,"VtepMAC":"0e:00:00:00:00:01"}');
  f.server.updateNode('n1', (n) => {
    n.metadata.annotations = { ...n.metadata.annotations, [`${P}node-public-ip`]: '198.51.100.1', [`${P}node-public-ipv6`]: '2001:db8:113::101' };
  });
  await waitUntil('the informer has the operator\'s annotations', async () => (await manager('n1', recordingLogger(), dual).nodePublicIps(signal)).publicIpv6 !== '');
  assert.deepEqual(await manager('n1', recordingLogger(), dual).nodePublicIps(signal), { publicIp: '198.51.100.1', publicIpv6: '2001:db8:113::101' });
  const previous = await manager('n1', recordingLogger(), dual).previousAttrs(parseIp('203.0.113.1'), signal);
  assert.equal(previous?.backendV6Data, v6Data(1), 'the IPv6 device keeps its MAC across restarts too');

  f.server.createNode('n2', { podCIDRs: ['198.18.2.0/24', '2001:db8:1900::/64'] });
  await assert.rejects(manager('n2', recordingLogger(), dual).acquireLease(dualAttrs(2), signal), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /"2001:db8:1800::\/56" specified in the flannel net config doesn't contain "2001:db8:1900::\/64"/.test(err.message));

  // IPv6-only vxlan: flanneld leaves out backend-data and public-ip.
  const v6only = '{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}';
  f.server.createNode('n3', { podCIDR: '2001:db8:1800:3::/64', podCIDRs: ['2001:db8:1800:3::/64'] });
  const attrs3 = { publicIpv6: parseIp('2001:db8:113::3'), backendType: 'vxlan', backendV6Data: v6Data(3) };
  const lease3 = await manager('n3', recordingLogger(), v6only).acquireLease(attrs3, signal);
  assert.equal(lease3.subnet.ipv4, undefined);
  const a3 = f.server.getNode('n3').metadata.annotations!;
  assert.deepEqual(Object.keys(a3).filter((k) => k.startsWith(P)).sort(), [`${P}backend-type`, `${P}backend-v6-data`, `${P}kube-subnet-manager`, `${P}public-ipv6`]);

  // A dual-stack agent sees n1 with both families, and n3 with its IPv6 side only: what each
  // family may program is the backend's peer check's to say, as for etcd leases.
  const peers = followPeers(manager('n9', recordingLogger(), dual), signal);
  f.server.createNode('n9', { podCIDRs: ['198.18.9.0/24', '2001:db8:1800:9::/64'] });
  await waitUntil('n1 is a dual-stack peer', () => [...peers.peers.values()].some((l) => l.subnet.ipv6 !== undefined && l.attrs.backendV6Data === v6Data(1)));
  await waitUntil('n3 arrives with its IPv6 side alone', () => peers.peers.get('2001:db8:1800:3::/64')?.subnet.ipv4 === undefined && peers.peers.has('2001:db8:1800:3::/64'));
});

test('one list, one watch and one GET of the node (at start) serve the lease, the peers, holding and the health check', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  f.server.createNode('n2', { podCIDR: '198.18.2.0/24' }, peerAnnotations(2));
  const m = manager('self');
  await m.previousAttrs(parseIp('203.0.113.1'), signal);
  await m.acquireLease(vxlanAttrs(1), signal);
  const view = followPeers(m, signal);
  void (async () => {
    for await (const _ of m.holdLease(signal)) void _;
  })();
  await waitUntil('n2 seen', () => view.peers.has('198.18.2.0/24'));
  // Held by the watch's word, not only the patch's: the watch is asked for once the list is in.
  await waitUntil('held, and watching', async () => (await m.checkLease()).held && requests(f, 'watch') === 1);
  const before = f.server.requests.length;
  for (let i = 0; i < 5; i++) assert.equal((await m.checkLease()).held, true);
  assert.equal(f.server.requests.length, before, 'the health check makes no request');
  assert.deepEqual([requests(f, 'list'), requests(f, 'watch'), requests(f, 'get'), requests(f, 'patch')], [1, 1, 1, 1]);
  const order = f.server.requests.map((r) => r.url);
  assert.ok(order.indexOf('/api/v1/nodes/self') < order.findIndex((u) => u.startsWith('/api/v1/nodes?')), 'the GET goes out before the list');
});

/** The fixture's client, with the informer's list answers and watches held back until released. */
function heldClient(f: KubeFixture, t: TestContext) {
  const client = f.client({ log: recordingLogger() });
  let releaseList = (): void => undefined;
  let releaseWatch = (): void => undefined;
  const listGate = new Promise<void>((resolve) => (releaseList = resolve));
  const watchGate = new Promise<void>((resolve) => (releaseWatch = resolve));
  t.after(() => {
    releaseList();
    releaseWatch();
  });
  return {
    client: {
      list: async (...args: Parameters<typeof client.list>) => {
        const page = await client.list(...args);
        await listGate;
        return page;
      },
      watch: async (...args: Parameters<typeof client.watch>) => {
        await watchGate;
        return client.watch(...args);
      },
      lastAlive: () => client.lastAlive(),
      get: client.get.bind(client),
      patch: client.patch.bind(client),
    },
    releaseList,
    releaseWatch,
  };
}

test('the lease comes from one GET of the node while every Node is being listed, and a list read before the patch does not undo it', { timeout: 30_000 }, async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  f.server.createNode('n2', { podCIDR: '198.18.2.0/24' }, peerAnnotations(2));
  const held = heldClient(f, t);
  const log = recordingLogger();
  const m = new KubeManager({ client: held.client, nodeName: 'self', netConf, annotationPrefix: 'flannel.alpha.coreos.com', log, informer: { backoff: { initialMs: 20, maxMs: 100 } } });
  void m.run(f.signal);
  // The list's snapshot is taken as it is asked for: before the patch below.
  await waitUntil('the list was asked for', () => requests(f, 'list') === 1);
  assert.deepEqual(await m.nodePublicIps(f.signal), { publicIp: '', publicIpv6: '' });
  assert.equal(await m.previousAttrs(parseIp('203.0.113.1'), f.signal), undefined, 'nothing published before');
  const asked = Date.now();
  const lease = await m.acquireLease(vxlanAttrs(1), f.signal);
  assert.equal(lease.subnet.ipv4?.ip.value, parseIp('198.18.1.0').value);
  assert.equal(f.server.getNode('self').metadata.annotations![`${P}public-ip`], '203.0.113.1');
  const before = await m.checkLease();
  assert.equal(before.held, true, 'held, by the patch\'s word, before the list is in');
  assert.ok(before.confirmedAt >= asked, 'confirmed when the lease was taken');
  assert.equal(log.lines.some((l) => l.msg === 'nodes listed'), false, 'the list is still held back');
  // NetworkUnavailable=False waits for the peers: a request behind it on the one connection is
  // answered, and no status patch has come.
  const up = m.networkUp(f.signal);
  await held.client.get('/api/v1/nodes/self', f.signal);
  assert.equal(requests(f, 'patch'), 1, 'only the annotations\' patch before the list is in');
  const view = followPeers(m, f.signal);
  held.releaseList();
  await up;
  assert.deepEqual(f.server.getNode('self').status.conditions?.map((c) => [c['type'], c['status']]), [['NetworkUnavailable', 'False']]);
  await waitUntil('n2 seen', () => view.peers.has('198.18.2.0/24'));
  // The watch, which would bring the patch's echo, is still held back: the cache is the list's,
  // with the patch's answer kept where the list predates it.
  assert.equal((await m.checkLease()).held, true, 'the published annotations survived the older list');
  held.releaseWatch();
  assert.deepEqual([requests(f, 'list'), requests(f, 'get'), requests(f, 'patch')], [1, 2, 2]);

  // Restarted, its list held back again: the GET shows what it published, nothing to patch.
  const again = heldClient(f, t);
  const m2 = new KubeManager({ client: again.client, nodeName: 'self', netConf, annotationPrefix: 'flannel.alpha.coreos.com', log: recordingLogger() });
  void m2.run(f.signal);
  assert.equal((await m2.previousAttrs(parseIp('203.0.113.1'), f.signal))?.backendData, vxlanAttrs(1).backendData, 'the vxlan MAC to keep');
  await m2.acquireLease(vxlanAttrs(1), f.signal);
  assert.equal((await m2.checkLease()).held, true);
  assert.deepEqual([requests(f, 'list'), requests(f, 'get'), requests(f, 'patch')], [2, 3, 2]);
});

test('a GET of the node that hangs does not hold up the lease once the list is in', { timeout: 20_000 }, async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  f.server.inject({ on: 'get', kind: 'hang' });
  const log = recordingLogger();
  // The GET's deadline is far beyond the test's bound: only the list can give the lease in time.
  const m = new KubeManager({ client: f.client({ log, requestTimeoutMs: 60_000 }), nodeName: 'self', netConf, annotationPrefix: 'flannel.alpha.coreos.com', log });
  void m.run(f.signal);
  assert.deepEqual(await m.nodePublicIps(f.signal), { publicIp: '', publicIpv6: '' });
  const lease = await m.acquireLease(vxlanAttrs(1), f.signal);
  assert.equal(lease.subnet.ipv4?.ip.value, parseIp('198.18.1.0').value);
  assert.equal(f.server.faultsFired, 1, 'the GET was made, and hangs');
});

test('the lease is announced when taken; an unusable podCIDR is refused by name; once listed, a changed node is no longer held', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('bad', { podCIDR: 'not-a-cidr' });
  await assert.rejects(manager('bad').acquireLease(vxlanAttrs(2), signal), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message.startsWith('node "bad" '));
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  const heard: boolean[] = [];
  const off = subscribe('lease', (m) => heard.push(m.held));
  t.after(off);
  const log = recordingLogger();
  const m = manager('self', log);
  await m.acquireLease(vxlanAttrs(1), signal);
  assert.deepEqual(heard, [true]);
  await waitUntil('held by the list\'s word', async () => log.lines.some((l) => l.msg === 'nodes listed') && (await m.checkLease()).held);
  // No holdLease here to put them back: the cache shows the annotations gone.
  f.server.updateNode('self', (n) => delete n.metadata.annotations![`${P}public-ip`]);
  await waitUntil('no longer held', async () => !(await m.checkLease()).held);
});

test('a failed GET of the node leaves the lease to the list, the failure logged once', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  f.server.inject({ on: 'get', kind: 'error' });
  const log = recordingLogger();
  const m = manager('self', log);
  const lease = await m.acquireLease(vxlanAttrs(1), signal);
  assert.equal(lease.subnet.ipv4?.ip.value, parseIp('198.18.1.0').value);
  assert.equal(f.server.faultsFired, 1);
  const failures = log.lines.filter((l) => l.msg === 'could not read node "self"; waiting for the list of every node');
  assert.deepEqual(failures.map((l) => (l['err'] as { code: string }).code), ['WEFT_ERR_KUBE_API']);
  assert.equal(requests(f, 'get'), 1, 'one GET, not retried');
});

test('holdLease does not publish again what acquireLease just published, even before the watch brings its echo', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  const m = manager('self');
  await m.previousAttrs(parseIp('203.0.113.1'), signal);
  // The informer's next watch gets no answer: until its deadline, no event reaches the cache.
  f.server.inject({ on: 'watch', kind: 'hang' });
  f.server.dropWatches();
  await m.acquireLease(vxlanAttrs(1), signal);
  assert.equal((await m.checkLease()).held, true, 'the cache has the published node at once');
  void (async () => {
    for await (const _ of m.holdLease(signal)) void _;
  })();
  await waitUntil('the hung watch was given up and the nodes listed again', () => f.server.faultsFired === 1 && requests(f, 'list') === 2, 20_000);
  await waitUntil('held', async () => (await m.checkLease()).held);
  assert.equal(requests(f, 'patch'), 1);
});

test('peers: managed nodes only, deletion and podCIDR change are removals, bad annotations are skipped by name', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  f.server.createNode('n2', { podCIDR: '198.18.2.0/24' }, peerAnnotations(2));
  f.server.createNode('unmanaged', { podCIDR: '198.18.9.0/24' });
  const log = recordingLogger();
  const m = manager('self', log);
  await m.acquireLease(vxlanAttrs(1), signal);
  const view = followPeers(m, signal);
  await waitUntil('n2 seen', () => view.peers.has('198.18.2.0/24'));
  assert.deepEqual([...view.peers.keys()], ['198.18.2.0/24'], 'own and unmanaged nodes are not peers');
  f.server.createNode('n3', { podCIDR: '198.18.3.0/24' }, peerAnnotations(3));
  f.server.createNode('bad', { podCIDR: '198.18.4.0/24' }, { ...peerAnnotations(4), [`${P}public-ip`]: 'not-an-ip' });
  f.server.createNode('outside', { podCIDR: '198.51.100.0/24' }, peerAnnotations(5));
  f.server.createNode('nocidr', {}, peerAnnotations(6));
  await waitUntil('n3 added', () => view.peers.has('198.18.3.0/24'));
  // Decoded as far as their annotations go; the backend's peer check refuses them, by reason.
  await waitUntil('bad and outside delivered', () => view.peers.has('198.18.4.0/24') && view.peers.has('198.51.100.0/24'));
  assert.equal(view.peers.get('198.18.4.0/24')?.attrs.publicIp, undefined);
  await waitUntil('a node without a podCIDR skipped', () => log.lines.some((l) => l.level === 'warn' && l.msg.startsWith('skipping node "nocidr"')));
  f.server.updateNode('n3', (n) => (n.spec = { podCIDR: '198.18.33.0/24' }));
  await waitUntil('podCIDR change', () => !view.peers.has('198.18.3.0/24') && view.peers.has('198.18.33.0/24'));
  f.server.deleteNode('n2');
  await waitUntil('n2 removed', () => !view.peers.has('198.18.2.0/24'));
  const removed = view.batches.flat().filter((e) => e.type === 'removed');
  assert.equal(removed.length, 2);
  assert.equal(removed.find((e) => e.lease.attrs.publicIp?.value === parseIp('203.0.113.2').value)?.lease.attrs.backendData, peerAnnotations(2)[`${P}backend-data`]);
});

test('holdLease publishes the annotations again when someone removes them, and yields a changed podCIDR', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  const m = manager('self');
  await m.acquireLease(vxlanAttrs(1), signal);
  const leases: string[] = [];
  void (async () => {
    for await (const l of m.holdLease(signal)) leases.push(`${l.subnet.ipv4?.ip.value}`);
  })();
  await waitUntil('held', async () => (await m.checkLease()).held);
  f.server.updateNode('self', (n) => delete n.metadata.annotations![`${P}public-ip`]);
  await waitUntil('not held while removed, or already restored', async () => f.server.getNode('self').metadata.annotations![`${P}public-ip`] === '203.0.113.1');
  f.server.updateNode('self', (n) => (n.spec = { podCIDR: '198.18.5.0/24' }));
  await waitUntil('the new lease', () => leases.length === 1);
  assert.equal(leases[0], `${parseIp('198.18.5.0').value}`);
});

test('a failing status patch is retried until it lands, each failure logged once', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('self', { podCIDR: '198.18.1.0/24' });
  f.server.inject({ on: 'patch', kind: 'error', times: 2 });
  const log = recordingLogger();
  await manager('self', log).acquireLease(vxlanAttrs(1), signal);
  assert.equal(f.server.getNode('self').metadata.annotations![`${P}public-ip`], '203.0.113.1');
  const failures = log.lines.filter((l) => l.msg === 'could not patch node annotations of node "self"; retrying');
  assert.deepEqual(failures.map((l) => (l['err'] as { code: string }).code), ['WEFT_ERR_KUBE_API', 'WEFT_ERR_KUBE_API']);
});

test('without NODE_NAME the node comes from the agent\'s Pod (POD_NAME, POD_NAMESPACE)', async (t) => {
  const { f, manager, signal } = await setup(t);
  f.server.createNode('worker-7', { podCIDR: '198.18.7.0/24' });
  f.server.createPod('kube-flannel', 'kube-flannel-ds-x1', 'worker-7');
  const lease = await manager({ podName: 'kube-flannel-ds-x1', podNamespace: 'kube-flannel' }).acquireLease(vxlanAttrs(7), signal);
  assert.equal(lease.subnet.ipv4?.ip.value, parseIp('198.18.7.0').value);
  const nodeGets = f.server.requests.filter((r) => r.method === 'GET' && /^\/api\/v1\/nodes\/[^?]+$/.test(r.url));
  assert.ok(nodeGets.every((r) => r.url === '/api/v1/nodes/worker-7'), `a Node GET waits for the name the Pod gives: ${nodeGets.map((r) => r.url).join(', ')}`);
  await assert.rejects(manager({ podName: '', podNamespace: '' }).acquireLease(vxlanAttrs(7), signal), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'));
});

test('alloc, as flannel: no informer; the own Node is read with GETs until it has a podCIDR, annotations published, no list or watch of Nodes', async (t) => {
  const { f, manager, signal } = await setup(t);
  const log = recordingLogger();
  const m = manager('n1', log, '{"Network":"198.18.0.0/16","Backend":{"Type":"alloc"}}');
  const acquiring = m.acquireLease({ publicIp: parseIp('203.0.113.1') }, signal);
  await waitUntil('the wait for the node is logged', () => log.lines.some((l) => l.msg === 'waiting for node "n1" to be registered'));
  f.server.createNode('n1', { podCIDR: '198.18.7.0/24' });
  f.server.createNode('n2', { podCIDR: '198.18.8.0/24' });
  const lease = await acquiring;
  assert.equal(lease.subnet.ipv4?.prefix, 24);
  assert.equal(f.server.getNode('n1').metadata.annotations?.[`${P}public-ip`], '203.0.113.1');
  assert.equal(f.server.getNode('n1').metadata.annotations?.[`${P}backend-type`], '', 'alloc publishes no backend type, as flannel');
  assert.equal((await m.nodePublicIps(signal)).publicIp, '');
  assert.deepEqual([requests(f, 'list'), requests(f, 'watch')], [0, 0], 'no informer of every Node');
  assert.ok(requests(f, 'get') >= 2, 'the own Node, read until it was there');
  assert.equal((await m.checkLease()).held, true);
  await m.networkUp(signal);
  assert.equal(f.server.getNode('n1').status.conditions?.[0]?.['status'], 'False', 'NetworkUnavailable=False without an informer to wait for');
  const first = await m.watchLeases(signal).next();
  assert.deepEqual(first.value, [], 'no peers');
});
