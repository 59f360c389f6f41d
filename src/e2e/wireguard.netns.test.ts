/**
 * The wireguard backend end to end, on machines whose kernel has no WireGuard: weft's own data
 * path in namespaces with a real etcd, pods on the real CNI bridge plugin, and stand-in flannel
 * nodes built as flanneld builds its device, with the independent WireGuard of Debian's
 * `wireguard-go` and `wg` (spec wireguard.md §2).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, readdir, readlink, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formatCidr } from '../ip/cidr.js';
import { parseGet } from '../netlink/wg-uapi.js';
import type { WgDevice } from '../netlink/wireguard.js';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { ipJson, netnsSkipReason, nsExec, spawnInNetns, stopProcess } from '../testing/netns.js';
import { initiation, mac1 } from '../testing/wg-reference.js';
import { WgStandIn } from '../testing/wg-standin.js';
import { uapiRequest } from '../testing/wg-uapi-client.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh, pingThrough, startCluster } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const healthPort = 8471;
const config = (backend: Record<string, unknown> = {}): string => JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'wireguard', ...backend } });
const flags = ['--healthz-ip=127.0.0.1', `--healthz-port=${healthPort}`];

/** A UAPI request to a weft node's device, over its socket (where `wg` would talk to it). */
const uapi = (node: ClusterNode, request: string, device = 'flannel-wg'): Promise<string> => uapiRequest(join(node.dir, 'wireguard', `${device}.sock`), request);
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

/** Sends each datagram (hex) from `ns` to `to`, as fast as the socket takes them. */
async function sendDatagrams(ns: string, to: string, port: number, datagrams: readonly Buffer[]): Promise<void> {
  const code = `import { createSocket } from 'node:dgram'; import { readFileSync } from 'node:fs';
const list = JSON.parse(readFileSync(0, 'utf8'));
const s = createSocket('udp4');
await Promise.all(list.map((hex) => new Promise((r) => s.send(Buffer.from(hex, 'hex'), ${port}, '${to}', r))));
s.close();`;
  await nsExec(ns, process.execPath, ['--input-type=module', '-e', code], { input: JSON.stringify(datagrams.map((d) => d.toString('hex'))) });
}

/** The UDP payloads of a pcap file (Ethernet, IPv4, UDP). */
function pcapPayloads(file: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 24; at + 16 <= file.length; ) {
    const len = file.readUInt32LE(at + 8);
    const frame = file.subarray(at + 16, at + 16 + len);
    at += 16 + len;
    const ihl = (frame[14]! & 0x0f) * 4;
    out.push(Buffer.from(frame.subarray(14 + ihl + 8)));
  }
  return out;
}

test('hostile datagrams on the port: garbage, truncated and oversized, initiations from unknown keys, a flood of them, and captured packets replayed change nothing and are counted', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'wireguard', config: config(), agentFlags: flags }, 2);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  const [p1, p2] = [await cluster.addPod(n1), await cluster.addPod(n2)];
  await assertFullMesh(cluster);
  const before = (await device(n1)).peers;
  const n1Key = Buffer.from(JSON.parse((await cluster.leases()).find((l) => l.value.includes(`"${n1.ip}"`))!.value).BackendData.PublicKey as string, 'base64');

  // Captured on n1 while n2's pod pings n1's: data packets that n1 has accepted once.
  const pcap = join(n1.dir, 'capture.pcap');
  const dump = spawnInNetns(n1.ns, 'tcpdump', ['-i', 'eth0', '--immediate-mode', '-U', '-w', pcap, '-c', '10', 'udp', 'port', '51820', 'and', 'src', 'host', n2.ip]);
  let dumpErr = '';
  dump.stderr?.on('data', (d: Buffer) => (dumpErr += d.toString()));
  await waitUntil('tcpdump listens', async () => (await stat(pcap).catch(() => undefined)) !== undefined, 5000);
  const ended = new Promise((resolve) => dump.once('exit', resolve));
  for (let i = 0; i < 10; i++) await cluster.ping(p2, p1.ip);
  await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 3000))]);
  await stopProcess(dump, 'SIGINT');
  const captured = pcapPayloads(await readFile(pcap)).filter((d) => d[0] === 4);
  assert.ok(captured.length >= 5, `captured ${captured.length} data packets: ${dumpErr}`);

  const random = (n: number): Buffer => randomBytes(n);
  const typed = (type: number, n: number): Buffer => Buffer.concat([Buffer.from([type, 0, 0, 0]), random(Math.max(0, n - 4))]).subarray(0, n);
  const garbage = [random(0), random(1), random(3), ...Array.from({ length: 50 }, () => random(Math.floor(Math.random() * 1600))), typed(1, 147), typed(1, 148), typed(1, 149), typed(2, 92), typed(2, 91), typed(3, 65), typed(4, 31), typed(5, 148), Buffer.alloc(9000, 1)];
  // Valid-looking: mac1 right, the rest noise (does not decrypt); and a real initiation from a key that is no peer.
  const noise = (): Buffer => {
    const m = typed(1, 148);
    mac1(n1Key, m.subarray(0, 116)).copy(m, 116);
    m.fill(0, 132);
    return m;
  };
  const stranger = initiation(random(32), n1Key, random(32), Buffer.from('400000006a0b0c0d01000000', 'hex'), 7);
  await sendDatagrams(n2.ns, n1.ip, 51820, [...garbage, noise(), noise(), stranger.message, ...captured]);
  let counted: Record<string, number> = {};
  await waitUntil('n1 counted them', async () => {
    const c = (counted = await packets(cluster, n1));
    return c['malformed']! >= 50 && c['badMac']! >= 1 && c['badHandshake']! >= 2 && c['unknownPeer']! >= 1 && c['replayed']! >= captured.length;
  }, 10_000).catch((err: unknown) => {
    throw new Error(`counters: ${JSON.stringify(counted)}`, { cause: err });
  });
  // A short fuzz run: the valid messages above with one to four bytes changed, a thousand times.
  const valid = [...captured, stranger.message, noise()];
  const fuzzed = Array.from({ length: 1000 }, (_, i) => {
    const m = Buffer.from(valid[i % valid.length]!);
    for (let j = 0; j <= i % 4; j++) m[Math.floor(Math.random() * m.length)] = Math.floor(Math.random() * 256);
    return m;
  });
  const seen = await packets(cluster, n1);
  // Under load an initiation gets a cookie reply instead of a refusal.
  const refused = (c: Record<string, number>): number => ['malformed', 'badMac', 'badHandshake', 'unknownPeer', 'replayedHandshake', 'badData', 'replayed', 'badSource', 'cookiesSent'].reduce((sum, k) => sum + (c[k] ?? 0), 0);
  await sendDatagrams(n2.ns, n1.ip, 51820, fuzzed);
  await waitUntil('n1 refused the fuzzed messages', async () => refused(await packets(cluster, n1)) - refused(seen) >= 900, 10_000);
  // A flood of initiations with a right mac1: past 1000 a second, n1 answers with cookies only.
  await sendDatagrams(n2.ns, n1.ip, 51820, Array.from({ length: 2500 }, noise));
  await waitUntil('n1 sent cookie replies', async () => ((counted = await packets(cluster, n1))['cookiesSent'] ?? 0) > 0, 10_000).catch((err: unknown) => {
    throw new Error(`counters: ${JSON.stringify(counted)}`, { cause: err });
  });

  // Under a flood that lasts, a real peer still gets through: n1 answers its initiation with a
  // cookie, and n2 comes back with a mac2 made from it, which n1 takes before any work.
  const floodFile = join(n2.dir, 'flood.json');
  await writeFile(floodFile, JSON.stringify(Array.from({ length: 100 }, () => noise().toString('hex'))));
  const flood = spawnInNetns(n2.ns, process.execPath, ['--input-type=module', '-e', `import { createSocket } from 'node:dgram'; import { readFileSync } from 'node:fs';
const list = JSON.parse(readFileSync(${JSON.stringify(floodFile)}, 'utf8')).map((h) => Buffer.from(h, 'hex'));
const s = createSocket('udp4');
const end = Date.now() + 12000;
let said = false;
while (Date.now() < end) { await Promise.all(list.map((m) => new Promise((r) => s.send(m, 51820, '${n1.ip}', r)))); if (!said) { process.stdout.write('flooding\\n'); said = true; } await new Promise((r) => setTimeout(r, 20)); }
s.close();`]);
  let floodOut = '';
  flood.stdout?.on('data', (d: Buffer) => (floodOut += d.toString()));
  try {
    // The flood's process takes a while to start on a busy machine: n2 begins again only once n1
    // is under it, answering the flood with cookies after it began (not the earlier burst's tail).
    await waitUntil('the lasting flood is sent', () => floodOut.includes('flooding'), 10_000);
    const cookiesBefore = (await packets(cluster, n1))['cookiesSent'] ?? 0;
    await waitUntil('n1 answers the lasting flood with cookies', async () => ((await packets(cluster, n1))['cookiesSent'] ?? 0) > cookiesBefore, 10_000);
    const key1 = Buffer.from(n1Key).toString('hex');
    // n2 forgets its session with n1 (the reconciler puts the peer back at once, without one).
    assert.match(await uapi(n2, `set=1\npublic_key=${key1}\nremove=true\n\n`), /errno=0/);
    await waitUntil('n2 has n1 as a peer again', async () => (await device(n2)).peers.length === 1, 5000);
    await waitUntil('n2\'s pod reaches n1\'s through the flood', () => cluster.ping(p2, p1.ip), 15_000);
    assert.ok((await packets(cluster, n2))['cookiesReceived']! >= 1, 'n2 was asked for a cookie and answered with it');
  } finally {
    await stopProcess(flood);
  }

  assert.equal(n1.agent?.exitCode, null, 'the agent runs');
  assert.deepEqual((await device(n1)).peers.map((p) => [p.publicKey, p.allowedIps.length]), before.map((p) => [p.publicKey, p.allowedIps.length]));
  await assertFullMesh(cluster);
});

test('dual-stack on weft\'s own WireGuard: separate mode\'s two devices, each family over its own', { skip, timeout: 180_000 }, async (t) => {
  const dualConfig = JSON.stringify({ Network: '198.18.0.0/16', EnableIPv6: true, IPv6Network: '2001:db8:1800::/56', Backend: { Type: 'wireguard' } });
  const cluster = await startCluster(t, { backend: 'wireguard', config: dualConfig, agentFlags: flags, ipv6: true }, 2);
  const [n1] = cluster.nodes as [ClusterNode];
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  // Once seen on CI (1 run in many): the IPv6 device listed no allowed IP just after the mesh
  // check passed. Read until each device lists its peer, naming what it listed if it never does.
  let [v4, v6] = [await device(n1, 'flannel-wg'), await device(n1, 'flannel-wg-v6')];
  await waitUntil('each device lists n2 with an allowed IP', async () => {
    [v4, v6] = [await device(n1, 'flannel-wg'), await device(n1, 'flannel-wg-v6')];
    return v4.peers[0]?.allowedIps.length === 1 && v6.peers[0]?.allowedIps.length === 1;
  }, 10_000).catch((err: unknown) => {
    const listed = (d: WgDevice): string => d.peers.map((p) => `${p.publicKey} [${p.allowedIps.map(formatCidr).join(' ')}]`).join(', ');
    throw new Error(`flannel-wg: ${listed(v4)}; flannel-wg-v6: ${listed(v6)}`, { cause: err });
  });
  assert.deepEqual([v4.listenPort, v6.listenPort], [51820, 51821]);
  assert.deepEqual([v4.peers.length, v6.peers.length], [1, 1]);
  assert.equal(v4.peers[0]?.allowedIps[0]?.ip.family, 4);
  assert.equal(v6.peers[0]?.allowedIps[0]?.ip.family, 6);
  assert.equal(v6.peers[0]?.endpoint?.ip.family, 6, 'the IPv6 device dials the peer\'s public IPv6');
});

test('IPv6-only in auto mode: one device, the peers dialled over IPv6', { skip, timeout: 180_000 }, async (t) => {
  const v6config = JSON.stringify({ EnableIPv4: false, EnableIPv6: true, IPv6Network: '2001:db8:1800::/56', Backend: { Type: 'wireguard', Mode: 'auto' } });
  const cluster = await startCluster(t, { backend: 'wireguard', config: v6config, agentFlags: flags, ipv6: true }, 2);
  const [n1] = cluster.nodes as [ClusterNode];
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  const d = await device(n1);
  assert.equal(d.peers[0]?.endpoint?.ip.family, 6);
  assert.equal(d.peers[0]?.endpoint?.port, 51820);
});

test('kube mode: the annotations flannel writes for wireguard, and pods reach pods', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 2, config: config(), kube: { podCidr: (n) => `198.18.${n * 10}.0/24` } });
  cluster.destroyAfter(t);
  for (const node of cluster.nodes) cluster.startAgent(node);
  await waitUntil('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 30_000);
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  const annotations = (await cluster.api!.getNode('node1')).metadata.annotations!;
  const ownKey = (await device(n2)).peers[0]?.publicKey;
  assert.equal(annotations['flannel.alpha.coreos.com/backend-type'], 'wireguard');
  assert.equal(annotations['flannel.alpha.coreos.com/backend-data'], `{"PublicKey":"${ownKey}","Port":51820}`, 'node1\'s key, as node2 has it for its peer');
  assert.equal(annotations['flannel.alpha.coreos.com/public-ip'], n1.ip);
  assert.equal(annotations['flannel.alpha.coreos.com/kube-subnet-manager'], 'true');
});

test('a graceful restart (SIGHUP) on weft\'s own WireGuard keeps the device, the socket and the sessions, and loses no packet', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'wireguard', config: config(), agentFlags: flags }, 2);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  const [p1, p2] = [await cluster.addPod(n1), await cluster.addPod(n2)];
  await assertFullMesh(cluster);
  const pid = n2.agent!.pid!;
  const before = (await device(n2)).peers[0]!;
  const handshakes = (await packets(cluster, n1))['handshakes'];
  const graceful = await pingThrough(p1, p2.ip, 400, async () => {
    process.kill(pid, 'SIGHUP');
    await waitUntil('the agent re-executed itself and took its device over', () => /WireGuard device, socket and sessions taken over/.test(n2.log) && n2.log.split('initial peers programmed').length === 3);
  });
  assert.ok(graceful.sent > 100, `ping ran (${graceful.sent} sent)`);
  // What queued in the TUN and the socket while no thread read them goes out in the kept sessions
  // (restored before the threads start: wg-handover.netns.test.ts).
  assert.equal(graceful.sent - graceful.received, 0, `a graceful restart lost ${graceful.sent - graceful.received} of ${graceful.sent} packets`);
  assert.equal(n2.agent?.pid, pid, 'the same process, re-executed');
  // The previous agent's state (its keys among it) is closed once restored: no memfd of it stays open.
  const fds = await readdir(`/proc/${pid}/fd`);
  const open = await Promise.all(fds.map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')));
  assert.deepEqual(open.filter((target) => target.includes('weft-wireguard-state')), [], 'the handed-over state is closed');
  const after = (await device(n2)).peers[0]!;
  assert.equal(after.lastHandshakeMs, before.lastHandshakeMs, 'the session went on: no new handshake');
  assert.equal((await packets(cluster, n1))['handshakes'], handshakes, 'nor one on the other side');
  assert.ok(after.rxBytes >= before.rxBytes, 'the counters went across too');

  // Killed and started again: the device stays (its address and route with it), new sessions are made.
  const index = (await ipJson<Array<{ ifindex: number }>>(n2.ns, ['link', 'show', 'flannel-wg']))[0]?.ifindex;
  await cluster.stopAgent(n2, 'SIGKILL');
  cluster.startAgent(n2, flags);
  await waitUntil('the new agent programmed its peer', () => n2.log.split('initial peers programmed').length === 4);
  await assertFullMesh(cluster);
  assert.equal((await ipJson<Array<{ ifindex: number }>>(n2.ns, ['link', 'show', 'flannel-wg']))[0]?.ifindex, index, 'the same device');
});

test('`wg` itself, Debian\'s wireguard-tools, shows weft\'s device and changes it', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'wireguard', config: config(), agentFlags: flags }, 2);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  // wg looks in /var/run/wireguard: the node's socket directory put there, in a mount namespace of its own.
  const wgOn = (node: ClusterNode, args: string): Promise<string> =>
    nsExec(node.ns, 'unshare', ['--mount', '--propagation', 'private', 'sh', '-c', `mkdir -p /var/run/wireguard && mount --bind ${join(node.dir, 'wireguard')} /var/run/wireguard && wg ${args}`]);
  const dump = (await wgOn(n1, 'show flannel-wg dump')).trim().split('\n');
  const peer = dump[1]!.split('\t');
  const n2Key = (await device(n2)).publicKey;
  assert.equal(dump[0]!.split('\t')[2], '51820', 'the listen port');
  assert.deepEqual([peer[0], peer[2]], [n2Key, `${n2.ip}:51820`]);
  assert.match(peer[3]!, /^198\.18\.\d+\.0\/24$/, 'its allowed IPs');
  assert.ok(Number(peer[4]) > 0, 'a handshake was made');
  // A change made with wg: put back at once, like a route deleted with ip.
  await wgOn(n1, `set flannel-wg peer ${n2Key} endpoint 203.0.113.99:4000`);
  await waitUntil('the endpoint is back', async () => (await device(n1)).peers[0]?.endpoint?.port === 51820, 5000);
});
