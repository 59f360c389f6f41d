/**
 * The wireguard backend end to end, on machines whose kernel has no WireGuard: weft's own data
 * path in namespaces with a real etcd, pods on the real CNI bridge plugin, and stand-in flannel
 * nodes built as flanneld builds its device, with the independent WireGuard of Debian's
 * `wireguard-go` and `wg` (spec wireguard.md §2).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { join } from 'node:path';
import { parseGet } from '../netlink/wg-uapi.js';
import type { WgDevice } from '../netlink/wireguard.js';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { netnsSkipReason, nsExec } from '../testing/netns.js';
import { WgStandIn } from '../testing/wg-standin.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh, startCluster } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const healthPort = 8471;
const config = (backend: Record<string, unknown> = {}): string => JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'wireguard', ...backend } });
const flags = ['--healthz-ip=127.0.0.1', `--healthz-port=${healthPort}`];

/** A UAPI request to a weft node's device, over its socket (where `wg` would talk to it). */
function uapi(node: ClusterNode, request: string, device = 'flannel-wg'): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(join(node.dir, 'wireguard', `${device}.sock`));
    let out = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      out += d;
      if (/errno=-?\d+\n\n$/.test(out)) {
        s.end();
        resolve(out);
      }
    });
    s.on('error', reject);
    s.write(request);
  });
}
const device = async (node: ClusterNode, name = 'flannel-wg'): Promise<WgDevice> => parseGet(await uapi(node, 'get=1\n\n', name));
const peerKeys = async (node: ClusterNode): Promise<string[]> => (await device(node)).peers.map((p) => p.publicKey).sort();

/** The node's data path counters, from `weft status`'s report. */
async function packets(cluster: Cluster, node: ClusterNode): Promise<Record<string, number>> {
  const { body } = await cluster.health(node, healthPort, '/status');
  assert.equal(body['dataPath'], 'wireguard, weft\'s own');
  return body['packets'] as Record<string, number>;
}

test('three weft nodes on weft\'s own WireGuard: every pod reaches every pod; `wg`\'s socket shows each node\'s peers', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'wireguard', config: config(), agentFlags: flags });
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  for (const node of cluster.nodes) {
    const d = await device(node);
    assert.equal(d.listenPort, 51820);
    assert.equal(d.peers.length, 2, `${node.name} has a peer per other node`);
    assert.ok(d.peers.every((p) => p.lastHandshakeMs !== undefined && p.rxBytes > 0), `${node.name} made sessions with both`);
  }
});

test('weft beside a flannel node on wireguard-go (a v0.20.2 lease without Port): pods reach pods, handshakes go both ways, and a new key on the flannel node replaces its old peer at once', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 3, config: config(), agentFlags: flags });
  const standIns: WgStandIn[] = [];
  cluster.destroyAfter(t, async () => {
    for (const s of standIns) await s.stop();
  });
  const [w1, w2, flannel] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  const standIn = await WgStandIn.start(cluster, flannel, { subnet: '198.18.200.0/24', publishPort: false });
  standIns.push(standIn);
  for (const n of [w1, w2]) cluster.startAgent(n);
  await waitUntil('the weft nodes wrote their subnet files', async () => (await Promise.all([w1, w2].map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 30_000);
  await standIn.addPeers();
  const [p1, p2, pf] = [await cluster.addPod(w1), await cluster.addPod(w2), await cluster.addPod(flannel)];
  // The flannel node initiates with w2, and w1 with the flannel node, each before anything else.
  await waitUntil('the flannel pod reaches w2\'s', () => cluster.ping(pf, p2.ip));
  const responder = await packets(cluster, w2);
  assert.ok(responder['initiationsReceived']! >= 1 && responder['responsesSent']! >= 1 && responder['initiationsSent'] === 0, JSON.stringify(responder));
  await waitUntil('w1\'s pod reaches the flannel pod', () => cluster.ping(p1, pf.ip));
  const initiator = await packets(cluster, w1);
  assert.ok(initiator['initiationsSent']! >= 1 && initiator['responsesReceived']! >= 1, JSON.stringify(initiator));
  await assertFullMesh(cluster);
  for (const n of [w1, w2]) {
    const d = await device(n);
    const flannelPeer = d.peers.find((p) => p.publicKey === standIn.publicKey);
    assert.ok(flannelPeer?.lastHandshakeMs !== undefined, `${n.name} made a session with the flannel node`);
    // No Port in the lease: dialled on this node's own port, as flannel does.
    assert.equal(flannelPeer.endpoint?.port, 51820);
  }

  // A new key on the flannel node (a reboot wiped /run/flannel/wgkey): weft removes the old peer
  // with the lease change, where flanneld would keep it until its device is made again.
  const oldKey = standIn.publicKey;
  await standIn.rekey();
  for (const n of [w1, w2]) {
    await waitUntil(`${n.name} holds the new key and not the old`, async () => {
      const keys = await peerKeys(n);
      return keys.includes(standIn.publicKey) && !keys.includes(oldKey);
    });
  }
  await assertFullMesh(cluster);
});

test('a PSK and keepalive cluster: the key is on every peer, sessions start without traffic, and a node with another PSK makes none', { skip, timeout: 180_000 }, async (t) => {
  const psk = Buffer.alloc(32, 0x5a).toString('base64');
  const cluster = await Cluster.create({ nodes: 3, config: config({ PSK: psk, PersistentKeepaliveInterval: 1 }), agentFlags: flags });
  const standIns: WgStandIn[] = [];
  cluster.destroyAfter(t, async () => {
    for (const s of standIns) await s.stop();
  });
  const [w1, flannel, stranger] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  const good = await WgStandIn.start(cluster, flannel, { subnet: '198.18.200.0/24', psk, keepaliveS: 1 });
  const bad = await WgStandIn.start(cluster, stranger, { subnet: '198.18.201.0/24', psk: Buffer.alloc(32, 0x11).toString('base64'), keepaliveS: 1 });
  standIns.push(good, bad);
  cluster.startAgent(w1);
  await waitUntil('w1 wrote its subnet file', async () => (await cluster.subnetEnv(w1))?.subnet !== undefined, 30_000);
  await good.addPeers();
  await bad.addPeers();
  // Keepalives make sessions with nobody sending anything.
  await waitUntil('a session with the flannel node, unprompted', async () => (await device(w1)).peers.some((p) => p.publicKey === good.publicKey && p.lastHandshakeMs !== undefined));
  const peers = (await device(w1)).peers;
  assert.equal(peers.length, 2);
  for (const p of peers) assert.deepEqual([p.presharedKey, p.keepaliveS], [psk, 1]);
  const [p1, pg, pb] = [await cluster.addPod(w1), await cluster.addPod(flannel), await cluster.addPod(stranger)];
  await waitUntil('w1 and the flannel node reach each other', async () => (await cluster.ping(p1, pg.ip)) && cluster.ping(pg, p1.ip));
  // Another PSK: both sides keep trying, and no packet passes either way.
  for (let i = 0; i < 3; i++) assert.equal((await cluster.ping(p1, pb.ip)) || (await cluster.ping(pb, p1.ip)), false);
  assert.equal((await device(w1)).peers.find((p) => p.publicKey === bad.publicKey)?.lastHandshakeMs, undefined);
  assert.ok((await packets(cluster, w1))['badHandshake']! > 0, 'the other PSK\'s handshakes were refused');
});

test('drift on weft\'s own device: a peer removed, changed or added by hand with `wg`\'s protocol, and the device deleted, are put back', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'wireguard', config: config(), agentFlags: flags }, 2);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  const [peer] = (await device(n1)).peers;
  assert.ok(peer);
  const hex = (b64: string): string => Buffer.from(b64, 'base64').toString('hex');
  const set = async (lines: string): Promise<void> => assert.match(await uapi(n1, `set=1\n${lines}\n\n`), /errno=0\n\n$/);
  const same = async (): Promise<boolean> => {
    const d = await device(n1);
    return d.peers.length === 1 && d.peers[0]!.publicKey === peer.publicKey && d.peers[0]!.endpoint?.port === 51820 && d.peers[0]!.allowedIps.length === 1;
  };
  await set(`public_key=${hex(peer.publicKey)}\nremove=true`);
  await waitUntil('the removed peer is back', same, 5000);
  await set(`public_key=${hex(peer.publicKey)}\nendpoint=203.0.113.99:4000`);
  await waitUntil('the changed endpoint is put back', same, 5000);
  await set(`public_key=${hex(Buffer.alloc(32, 3).toString('base64'))}\nallowed_ip=198.18.250.0/24`);
  await waitUntil('the peer no lease wants is removed', same, 5000);
  await assertFullMesh(cluster);
  // The device itself: made again, with its address, its route and its peers.
  await nsExec(n2.ns, 'ip', ['link', 'del', 'flannel-wg']);
  await waitUntil('n2\'s device is back with its peer', async () => (await device(n2).catch(() => undefined))?.peers.length === 1, 10_000);
  await assertFullMesh(cluster);
});
