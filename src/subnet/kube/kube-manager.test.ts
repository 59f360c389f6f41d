/** The Kubernetes subnet manager against the in-test API server, through the real client library. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeManager } from './kube-manager.js';
import { KubeApiServer } from '../../testing/kube-apiserver.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import { followPeers } from '../../testing/peer-view.js';
import { waitUntil } from '../../testing/wait.js';
import { parseIp } from '../../ip/ip.js';
import { isWeftError } from '../../core/errors.js';

const P = 'flannel.alpha.coreos.com/';
const netConf = '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}';
const vxlanAttrs = (n: number) => ({ publicIp: parseIp(`203.0.113.${n}`), backendType: 'vxlan', backendData: `{"VNI":1,"VtepMAC":"0e:00:00:00:00:0${n}"}` });
const peerAnnotations = (n: number): Record<string, string> => ({
  [`${P}kube-subnet-manager`]: 'true',
  [`${P}backend-type`]: 'vxlan',
  [`${P}backend-data`]: `{"VNI":1,"VtepMAC":"0e:00:00:00:00:0${n}"}`,
  [`${P}public-ip`]: `203.0.113.${n}`,
});

async function setup(t: { after(fn: () => Promise<void> | void): void }) {
  const server = new KubeApiServer({ token: 't0ken' });
  const url = await server.listen();
  const ctl = new AbortController();
  t.after(async () => {
    ctl.abort();
    await server.close();
  });
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser({ name: 'test', server: url, skipTLSVerify: true }, { name: 'agent', token: 't0ken' });
  const manager = (nodeName: string, log = recordingLogger()) =>
    new KubeManager({ kubeConfig: kc, nodeName, netConf, annotationPrefix: 'flannel.alpha.coreos.com', log, pollMs: 20 });
  return { server, manager, signal: ctl.signal };
}

test('the lease is the node\'s podCIDR, waited for, and the annotations are flanneld\'s', async (t) => {
  const { server, manager, signal } = await setup(t);
  server.createNode('n1', {});
  const log = recordingLogger();
  const m = manager('n1', log);
  const acquiring = m.acquireLease(vxlanAttrs(1), signal);
  await waitUntil('the wait is logged', () => log.lines.some((l) => /waiting for node "n1" to be assigned a podCIDR/.test(l.msg)));
  server.updateNode('n1', (n) => (n.spec = { podCIDR: '198.18.7.0/24', podCIDRs: ['198.18.7.0/24'] }));
  const lease = await acquiring;
  assert.equal(lease.subnet.ipv4?.ip.value, parseIp('198.18.7.0').value);
  const a = server.getNode('n1').metadata.annotations!;
  assert.equal(a[`${P}kube-subnet-manager`], 'true');
  assert.equal(a[`${P}backend-type`], 'vxlan');
  assert.equal(a[`${P}backend-data`], '{"VNI":1,"VtepMAC":"0e:00:00:00:00:01"}');
  assert.equal(a[`${P}public-ip`], '203.0.113.1');
  assert.equal(a['node.alpha.kubernetes.io/ttl'], '0', 'other annotations are kept');
  assert.ok(server.requests.some((r) => r.startsWith('PATCH /api/v1/nodes/n1/status application/strategic-merge-patch+json')));
  await m.networkUp();
  assert.deepEqual(server.getNode('n1').status.conditions?.map((c) => [c['type'], c['status'], c['reason']]), [['NetworkUnavailable', 'False', 'FlannelIsUp']]);
  assert.equal(await m.verifyLease(), true);
  // A restarted agent finds what it published, to recreate its vxlan device with the same MAC.
  assert.equal((await manager('n1').previousAttrs(parseIp('203.0.113.1')))?.backendData, '{"VNI":1,"VtepMAC":"0e:00:00:00:00:01"}');
});

test('public-ip-overwrite is published instead of the detected address; a podCIDR outside the network is an error', async (t) => {
  const { server, manager, signal } = await setup(t);
  server.createNode('n1', { podCIDR: '198.18.3.0/24' }, { [`${P}public-ip-overwrite`]: '198.51.100.9' });
  await manager('n1').acquireLease(vxlanAttrs(1), signal);
  assert.equal(server.getNode('n1').metadata.annotations![`${P}public-ip`], '198.51.100.9');
  server.createNode('n2', { podCIDR: '203.0.113.0/24' });
  await assert.rejects(manager('n2').acquireLease(vxlanAttrs(2), signal), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /doesn't contain "203\.0\.113\.0\/24" PodCIDR of the "n2" node/.test(err.message));
});

test('peers come from a list+watch: managed nodes only, deletion and podCIDR change are removals, bad annotations are skipped by name', async (t) => {
  const { server, manager, signal } = await setup(t);
  server.createNode('self', { podCIDR: '198.18.1.0/24' });
  server.createNode('n2', { podCIDR: '198.18.2.0/24' }, peerAnnotations(2));
  server.createNode('unmanaged', { podCIDR: '198.18.9.0/24' });
  const log = recordingLogger();
  const m = manager('self', log);
  await m.acquireLease(vxlanAttrs(1), signal);
  const view = followPeers(m, signal);
  await waitUntil('n2 seen', () => view.peers.has('198.18.2.0/24'));
  assert.deepEqual([...view.peers.keys()], ['198.18.2.0/24'], 'own and unmanaged nodes are not peers');
  server.createNode('n3', { podCIDR: '198.18.3.0/24' }, peerAnnotations(3));
  server.createNode('bad', { podCIDR: '198.18.4.0/24' }, { ...peerAnnotations(4), [`${P}public-ip`]: 'not-an-ip' });
  await waitUntil('n3 added', () => view.peers.has('198.18.3.0/24'));
  assert.ok(log.lines.some((l) => l.level === 'warn' && /skipping node "bad"/.test(l.msg)));
  server.updateNode('n3', (n) => (n.spec = { podCIDR: '198.18.33.0/24' }));
  await waitUntil('podCIDR change', () => !view.peers.has('198.18.3.0/24') && view.peers.has('198.18.33.0/24'));
  server.deleteNode('n2');
  await waitUntil('n2 removed', () => !view.peers.has('198.18.2.0/24'));
  const removed = view.batches.flat().filter((e) => e.type === 'removed');
  assert.equal(removed.length, 2);
  assert.equal(removed.find((e) => e.lease.subnet.ipv4?.prefix === 24 && e.lease.attrs.publicIp.value === parseIp('203.0.113.2').value)?.lease.attrs.backendData, peerAnnotations(2)[`${P}backend-data`]);
});

test('410 Gone and dropped watches lead to a re-list whose difference is delivered: nothing is missed', async (t) => {
  const { server, manager, signal } = await setup(t);
  server.createNode('self', { podCIDR: '198.18.1.0/24' });
  server.createNode('n2', { podCIDR: '198.18.2.0/24' }, peerAnnotations(2));
  const log = recordingLogger();
  const m = manager('self', log);
  await m.acquireLease(vxlanAttrs(1), signal);
  const view = followPeers(m, signal);
  await waitUntil('synced', () => view.peers.size === 1);
  // In one synchronous step, so the client cannot reconnect in between: the watch drops, nodes
  // change, and history is compacted away; the client's resume point is then 410 Gone.
  server.dropWatches();
  server.deleteNode('n2');
  server.createNode('n5', { podCIDR: '198.18.5.0/24' }, peerAnnotations(5));
  server.compact();
  await waitUntil('the new set', () => view.peers.size === 1 && view.peers.has('198.18.5.0/24'));
  assert.ok(log.lines.some((l) => /410 Gone/.test(l.msg)), 'the 410 was seen and led to a re-list');
  assert.ok(view.batches.flat().some((e) => e.type === 'removed' && e.lease.subnet.ipv4?.ip.value === parseIp('198.18.2.0').value));
});

test('holdLease publishes the annotations again when someone removes them', async (t) => {
  const { server, manager, signal } = await setup(t);
  server.createNode('self', { podCIDR: '198.18.1.0/24' });
  const m = manager('self');
  await m.acquireLease(vxlanAttrs(1), signal);
  const holding = (async () => {
    for await (const _ of m.holdLease(signal)) void _;
  })();
  await new Promise((r) => setTimeout(r, 100));
  server.updateNode('self', (n) => delete n.metadata.annotations![`${P}public-ip`]);
  await waitUntil('restored', () => server.getNode('self').metadata.annotations![`${P}public-ip`] === '203.0.113.1');
  void holding;
});
