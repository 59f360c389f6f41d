/**
 * The wireguard backend's decisions against an in-memory kernel (FakeNetlink) and WireGuard port
 * (FakeWireGuard), on the kernel path: devices per mode, what the node publishes, one peer per
 * lease and device, ports as flannel dials them, no stale peers, refusals. The userspace path and
 * the wire are the end-to-end tests' (src/e2e/wireguard.netns.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from '../../config/network-config.js';
import { formatCidr, parseCidr } from '../../ip/cidr.js';
import { formatIp, parseIp } from '../../ip/ip.js';
import type { Lease } from '../../lease/lease.js';
import { errnoOf, linkKind } from '../../netlink/netlink.js';
import { FakeNetlink } from '../../testing/fake-netlink.js';
import { FakeWireGuard } from '../../testing/fake-wireguard.js';
import { leaseFeed } from '../../testing/lease-feed.js';
import { ManualClock } from '../../testing/manual-clock.js';
import { memoryKeys } from '../../testing/memory-keys.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import { waitUntil } from '../../testing/wait.js';
import type { ExternalInterface } from '../external-interface.js';
import { familyPlanes } from '../family-plane.js';
import { KernelPath } from './kernel-path.js';
import { wireguardBackend } from './wireguard-backend.js';

const ext: ExternalInterface = {
  index: 2, name: 'eth0', mtu: 1500,
  ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('203.0.113.1'), ifaceAddr6: parseIp('2001:db8:113::1'), publicIpv6: parseIp('2001:db8:113::1'),
};
const dual = (backend: Record<string, unknown> = {}) => parseNetworkConfig(JSON.stringify({ Network: '198.18.0.0/16', EnableIPv6: true, IPv6Network: '2001:db8:1800::/56', Backend: { Type: 'wireguard', ...backend } }));
const key = (n: number): string => Buffer.alloc(32, n).toString('base64');
const data = (n: number, port?: number): string => JSON.stringify({ PublicKey: key(n), ...(port === undefined ? {} : { Port: port }) });
const peer = (n: number, attrs: Partial<Lease['attrs']> = {}): Lease => ({
  subnet: { ipv4: parseCidr(`198.18.${n}.0/24`), ipv6: parseCidr(`2001:db8:1800:${n}::/64`) },
  attrs: { publicIp: parseIp(`203.0.113.${n}`), publicIpv6: parseIp(`2001:db8:113::${n}`), backendType: 'wireguard', backendData: data(n, 51820), backendV6Data: data(n, 51821), ...attrs },
});

/** Waits for `check`, moving the manual clock past the reconciler's debounce between looks. */
const ticking = (clock: ManualClock) => (what: string, check: () => boolean | Promise<boolean>): Promise<void> =>
  waitUntil(what, async () => {
    await clock.advance(100);
    return check();
  });

async function start(t: { after(fn: () => unknown): void }, config = dual(), clock?: ManualClock) {
  const nl = new FakeNetlink();
  const wg = new FakeWireGuard((name) => [...nl.linkTable.values()].some((l) => l.name === name && linkKind(l) === 'wireguard'));
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const keys = memoryKeys();
  const net = await wireguardBackend.create(config, { netlink: nl, log: recordingLogger(), extIface: ext, planes: familyPlanes(config, ext), keys, wireguard: wg, ...(clock ? { clock } : {}) }, ctl.signal);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  const own = await keys.curve25519();
  return { nl, wg, net, feed, ctl, own };
}

const peersOf = async (wg: FakeWireGuard, device: string) =>
  ((await wg.device(device))?.peers ?? []).map((p) => `${p.publicKey.slice(0, 4)} ${p.endpoint ? `${formatIp(p.endpoint.ip)}:${p.endpoint.port}` : '-'} ${p.allowedIps.map(formatCidr).join(',')}`).sort();

test('separate mode, dual-stack: two kernel devices with the key and their ports, flannel\'s lease data, the addresses, one route per family, one peer per lease and device', async (t) => {
  const { nl, wg, net, feed, own } = await start(t);
  const [v4, v6] = [[...nl.linkTable.values()].find((l) => l.name === 'flannel-wg'), [...nl.linkTable.values()].find((l) => l.name === 'flannel-wg-v6')];
  assert.ok(v4 && v6, 'both devices made');
  assert.deepEqual([v4.mtu, v6.mtu, net.mtu], [1420, 1420, 1420]);
  assert.deepEqual([(await wg.device('flannel-wg'))?.listenPort, (await wg.device('flannel-wg-v6'))?.listenPort], [51820, 51821]);
  assert.equal((await wg.device('flannel-wg'))?.publicKey, own.publicKey);
  assert.equal(net.attrs.backendType, 'wireguard');
  assert.equal(net.attrs.backendData, `{"PublicKey":"${own.publicKey}","Port":51820}`);
  assert.equal(net.attrs.backendV6Data, `{"PublicKey":"${own.publicKey}","Port":51821}`);
  assert.ok(nl.addrs.some((a) => a.index === v4.index && formatIp(a.ip) === '198.18.1.0' && a.prefix === 32));
  assert.ok(nl.addrs.some((a) => a.index === v6.index && formatIp(a.ip) === '2001:db8:1800:1::' && a.prefix === 128));
  // v0.20.2's leases carry no Port: dialled on this node's own ports.
  feed.push([{ type: 'added', lease: peer(2) }, { type: 'added', lease: peer(3, { backendData: data(3), backendV6Data: data(3) }) }]);
  await waitUntil('peers on both devices', async () => (await peersOf(wg, 'flannel-wg')).length === 2 && (await peersOf(wg, 'flannel-wg-v6')).length === 2);
  assert.deepEqual(await peersOf(wg, 'flannel-wg'), ['AgIC 203.0.113.2:51820 198.18.2.0/24', 'AwMD 203.0.113.3:51820 198.18.3.0/24']);
  assert.deepEqual(await peersOf(wg, 'flannel-wg-v6'), ['AgIC 2001:db8:113::2:51821 2001:db8:1800:2::/64', 'AwMD 2001:db8:113::3:51821 2001:db8:1800:3::/64']);
  assert.deepEqual(
    [...nl.routeTable.values()].map((r) => `${formatCidr(r.dst)} ${r.index} ${r.gateway ? 'gw' : 'dev'}`).sort(),
    [`198.18.0.0/16 ${v4.index} dev`, `2001:db8:1800::/56 ${v6.index} dev`],
  );
});

test('no stale peers: a new key replaces the old peer, a removed lease takes its peers; on the kernel\'s device a peer added or changed by hand is put right by the periodic pass', async (t) => {
  const clock = new ManualClock();
  const { wg, feed } = await start(t, dual(), clock);
  feed.push([{ type: 'added', lease: peer(2) }]);
  await waitUntil('peer 2', async () => (await peersOf(wg, 'flannel-wg')).length === 1);
  feed.push([{ type: 'added', lease: peer(2, { backendData: data(7, 51820), backendV6Data: data(7, 51821) }) }]);
  await waitUntil('only the new key', async () => JSON.stringify(await peersOf(wg, 'flannel-wg')) === JSON.stringify(['BwcH 203.0.113.2:51820 198.18.2.0/24']));
  assert.deepEqual(await peersOf(wg, 'flannel-wg-v6'), ['BwcH 2001:db8:113::2:51821 2001:db8:1800:2::/64']);
  // By hand: a peer no lease wants, and the endpoint of one that a lease does.
  await wg.configure('flannel-wg', { peers: [{ publicKey: key(8), keepaliveS: 0, allowedIps: [parseCidr('198.18.99.0/24')] }, { publicKey: key(7), endpoint: { ip: parseIp('198.51.100.9'), port: 1 }, keepaliveS: 0, allowedIps: [parseCidr('198.18.2.0/24')] }] });
  // The kernel's port announces nothing: the periodic pass (60 s) finds it.
  await clock.advance(60_000);
  await ticking(clock)('put right', async () => JSON.stringify(await peersOf(wg, 'flannel-wg')) === JSON.stringify(['BwcH 203.0.113.2:51820 198.18.2.0/24']));
  feed.push([{ type: 'removed', lease: peer(2, { backendData: data(7, 51820), backendV6Data: data(7, 51821) }) }]);
  await waitUntil('peer 2 gone from both devices', async () => (await peersOf(wg, 'flannel-wg')).length === 0 && (await peersOf(wg, 'flannel-wg-v6')).length === 0);
});

test('a lease of another backend type is not this backend\'s: no peer, no refusal', async (t) => {
  const { wg, feed, net } = await start(t);
  feed.push([{ type: 'added', lease: peer(3, { backendType: 'vxlan' }) }, { type: 'added', lease: peer(2) }]);
  await waitUntil('peer 2', async () => (await peersOf(wg, 'flannel-wg')).length === 1);
  assert.deepEqual(await peersOf(wg, 'flannel-wg'), ['AgIC 203.0.113.2:51820 198.18.2.0/24']);
  assert.deepEqual(net.peers().map((p) => `${p.subnet} ${p.state}`).filter((p) => p.includes('198.18.3.')), []);
});

test('refusals: data that does not decode, and a key a live lease holds (it would take that node\'s traffic); the second is taken once the first goes', async (t) => {
  const { wg, feed, net } = await start(t);
  feed.push([{ type: 'added', lease: peer(2) }, { type: 'added', lease: peer(5, { backendData: '{"PublicKey":"short"}', backendV6Data: 'null' }) }]);
  await waitUntil('peer 2', async () => (await peersOf(wg, 'flannel-wg')).length === 1);
  await waitUntil('peer 5 refused', () => net.peers().some((p) => p.subnet.startsWith('198.18.5.0/24') && p.state === 'refused'));
  assert.match(net.peers().find((p) => p.subnet.startsWith('198.18.5.0/24'))!.reason ?? '', /no WireGuard PublicKey/);
  feed.push([{ type: 'added', lease: peer(6, { backendData: data(2, 51820), backendV6Data: data(2, 51821) }) }]);
  await waitUntil('peer 6 refused for peer 2\'s key', () => net.peers().some((p) => p.subnet.startsWith('198.18.6.0/24') && p.state === 'refused'));
  assert.deepEqual(await peersOf(wg, 'flannel-wg'), ['AgIC 203.0.113.2:51820 198.18.2.0/24']);
  feed.push([{ type: 'removed', lease: peer(2) }]);
  await waitUntil('peer 6 has the key now', async () => JSON.stringify(await peersOf(wg, 'flannel-wg')) === JSON.stringify(['AgIC 203.0.113.6:51820 198.18.6.0/24']));
});

test('single-device modes: one peer on flannel-wg with every subnet, dialled at the port the peer listens on (ListenPort), where flannel dials ListenPortV6 (Q1)', async (t) => {
  for (const [mode, ip] of [['ipv4', '203.0.113.2:51820'], ['ipv6', '2001:db8:113::2:51820'], ['auto', '203.0.113.2:51820']] as const) {
    const { nl, wg, feed, net } = await start(t, dual({ Mode: mode }));
    assert.deepEqual([...nl.linkTable.values()].filter((l) => linkKind(l) === 'wireguard').map((l) => l.name), ['flannel-wg'], mode);
    assert.equal(net.attrs.backendV6Data?.includes('"Port":51821'), true, 'ListenPortV6 is published in every mode, as flannel');
    feed.push([{ type: 'added', lease: peer(2) }]);
    await waitUntil(`${mode}: peer 2`, async () => (await peersOf(wg, 'flannel-wg')).length === 1);
    assert.deepEqual(await peersOf(wg, 'flannel-wg'), [`AgIC ${ip} 198.18.2.0/24,2001:db8:1800:2::/64`], mode);
  }
});

test('auto on an IPv6-only node dials the peer\'s public IPv6; PSK and keepalive reach every peer', async (t) => {
  const psk = Buffer.alloc(32, 0x5a).toString('base64');
  const v6only = parseNetworkConfig(JSON.stringify({ EnableIPv4: false, EnableIPv6: true, IPv6Network: '2001:db8:1800::/56', Backend: { Type: 'wireguard', Mode: 'auto', PSK: psk, PersistentKeepaliveInterval: 25 } }));
  const { wg, feed } = await start(t, v6only);
  feed.push([{ type: 'added', lease: { subnet: { ipv6: parseCidr('2001:db8:1800:2::/64') }, attrs: { publicIpv6: parseIp('2001:db8:113::2'), backendType: 'wireguard', backendV6Data: data(2, 51821) } } }]);
  await waitUntil('peer 2', async () => (await peersOf(wg, 'flannel-wg')).length === 1);
  const [p] = (await wg.device('flannel-wg'))!.peers;
  // No BackendData (IPv4) to read the peer's ListenPort from: this node's own, where it listens in this mode.
  assert.deepEqual([p?.endpoint && formatIp(p.endpoint.ip), p?.endpoint?.port, p?.presharedKey, p?.keepaliveS], ['2001:db8:113::2', 51820, psk, 25]);
});

test('a device deleted by hand is made again, with its key, port and peers', async (t) => {
  const { nl, wg, feed } = await start(t);
  feed.push([{ type: 'added', lease: peer(2) }]);
  await waitUntil('peer 2', async () => (await peersOf(wg, 'flannel-wg')).length === 1);
  const old = [...nl.linkTable.values()].find((l) => l.name === 'flannel-wg')!;
  await nl.deleteLink(old.index);
  await waitUntil('made again with its peer', async () => (await peersOf(wg, 'flannel-wg')).length === 1 && [...nl.linkTable.values()].some((l) => l.name === 'flannel-wg' && l.index !== old.index));
  assert.equal((await wg.device('flannel-wg'))?.listenPort, 51820);
});

test('the kernel path where the kernel makes WireGuard devices (an existing one is kept); weft\'s own where it does not know the kind', async () => {
  const nl = new FakeNetlink();
  assert.equal(await KernelPath.available(nl, 'flannel-wg', 1420), true);
  const made = [...nl.linkTable.values()].find((l) => l.name === 'flannel-wg')!;
  assert.equal(await KernelPath.available(nl, 'flannel-wg', 1420), true);
  assert.equal([...nl.linkTable.values()].find((l) => l.name === 'flannel-wg')?.index, made.index, 'kept, not made again');
  const bare = new FakeNetlink();
  bare.missingKinds.add('wireguard');
  assert.equal(await KernelPath.available(bare, 'flannel-wg', 1420), false);
  // weft's own TUN of an earlier run stays where it is while the kernel is asked.
  const tun = await bare.createLink('flannel-wg', { kind: 'vxlan', vxlan: { vni: 1, port: 0, learning: false, gbp: false } }, {});
  assert.equal(await KernelPath.available(bare, 'flannel-wg', 1420), false);
  assert.equal((await bare.linkByName('flannel-wg'))?.index, tun.index);
  bare.missingKinds.clear();
  assert.equal(await KernelPath.available(bare, 'flannel-wg', 1420), true);
  assert.deepEqual([...bare.linkTable.values()].map((l) => l.name).sort(), ['eth0', 'flannel-wg'], 'the probe went again');
  // Any other refusal is not "no WireGuard here": it stops the agent with its reason.
  const failing = new FakeNetlink();
  failing.failNext('createLink');
  await assert.rejects(KernelPath.available(failing, 'flannel-wg', 1420));
});

test('separate mode reads each family\'s own data: the IPv6 device takes BackendV6Data\'s key and port', async (t) => {
  const { wg, feed } = await start(t);
  feed.push([{ type: 'added', lease: peer(2, { backendData: data(2, 4000), backendV6Data: data(12, 4001) }) }]);
  await waitUntil('both devices', async () => (await peersOf(wg, 'flannel-wg')).length === 1 && (await peersOf(wg, 'flannel-wg-v6')).length === 1);
  assert.deepEqual(await peersOf(wg, 'flannel-wg'), ['AgIC 203.0.113.2:4000 198.18.2.0/24']);
  assert.deepEqual(await peersOf(wg, 'flannel-wg-v6'), ['DAwM 2001:db8:113::2:4001 2001:db8:1800:2::/64']);
});

test('single-device modes: the key from BackendV6Data when there is no BackendData, refusals for bad data and an address to dial that is missing, and only the families that pass the peer check', async (t) => {
  const { wg, feed, net } = await start(t, dual({ Mode: 'ipv4' }));
  feed.push([
    { type: 'added', lease: peer(2, { backendData: undefined as unknown as string, backendV6Data: data(2, 4001) }) },
    { type: 'added', lease: peer(3, { backendV6Data: '{"PublicKey":1}' }) },
    { type: 'added', lease: { subnet: { ipv6: parseCidr('2001:db8:1800:4::/64') }, attrs: { publicIpv6: parseIp('2001:db8:113::4'), backendType: 'wireguard', backendV6Data: data(4, 51821) } } },
    { type: 'added', lease: peer(5, { backendData: undefined as unknown as string, backendV6Data: undefined as unknown as string }) },
  ]);
  await waitUntil('peer 2 programmed, 3, 4 and 5 refused', () => net.peers().filter((p) => p.state === 'refused').length === 3 && net.peers().some((p) => p.state === 'programmed'));
  // No BackendData: the v6 data's key, and this node's ListenPort (ListenPortV6 is not listened on in this mode).
  assert.deepEqual(await peersOf(wg, 'flannel-wg'), ['AgIC 203.0.113.2:51820 198.18.2.0/24,2001:db8:1800:2::/64']);
  const why = (n: string): string => net.peers().find((p) => p.subnet.includes(n))?.reason ?? '';
  assert.match(why('198.18.3.0'), /BackendV6Data has no WireGuard PublicKey/);
  assert.match(why('2001:db8:1800:4::'), /Mode ipv4 dials its IPv4 address, and it has none/);
  assert.match(why('198.18.5.0'), /no WireGuard BackendData/);
});

test('routes: the network\'s through each device; a stray route through a device goes, the operator\'s elsewhere stay', async (t) => {
  const clock = new ManualClock();
  const { nl, feed } = await start(t, dual(), clock);
  feed.push([]);
  const settled = ticking(clock);
  await settled('the first pass', () => nl.routeTable.has('198.18.0.0/16'));
  const wgIndex = [...nl.linkTable.values()].find((l) => l.name === 'flannel-wg')!.index;
  nl.kernel.addRoute({ dst: parseCidr('198.18.77.0/24'), index: wgIndex });
  nl.kernel.addRoute({ dst: parseCidr('198.18.78.0/24'), gateway: parseIp('203.0.113.9'), index: 2 });
  nl.kernel.addRoute({ dst: parseCidr('198.51.100.0/24'), index: wgIndex });
  nl.kernel.addRoute({ dst: parseCidr('198.18.79.0/24'), gateway: parseIp('203.0.113.9'), index: wgIndex });
  nl.kernel.addRoute({ dst: parseCidr('198.18.80.0/24'), index: 2 });
  await settled('the stray route through flannel-wg is gone', () => !nl.routeTable.has('198.18.77.0/24'));
  assert.ok(nl.routeTable.has('198.18.78.0/24'), 'a route via a gateway is not the backend\'s');
  assert.ok(nl.routeTable.has('198.51.100.0/24'), 'nor one outside the network');
  assert.ok(nl.routeTable.has('198.18.79.0/24'), 'nor one via a gateway, even through the device');
  assert.ok(nl.routeTable.has('198.18.80.0/24'), 'nor one through another device');
  assert.ok(nl.routeTable.has('198.18.0.0/16') && nl.routeTable.has('2001:db8:1800::/56'));
});

test('a device\'s address taken away, its MTU changed or the link set down by hand: put back', async (t) => {
  const clock = new ManualClock();
  const { nl, feed } = await start(t, dual(), clock);
  feed.push([]);
  const settled = ticking(clock);
  await settled('the first pass', () => nl.routeTable.has('198.18.0.0/16'));
  const v4 = [...nl.linkTable.values()].find((l) => l.name === 'flannel-wg')!;
  const v6 = [...nl.linkTable.values()].find((l) => l.name === 'flannel-wg-v6')!;
  await nl.deleteAddress(v6.index, parseIp('2001:db8:1800:1::'));
  await settled('the /128 back', () => nl.addrs.some((a) => a.index === v6.index && formatIp(a.ip) === '2001:db8:1800:1::' && a.prefix === 128));
  await nl.setLink(v4.index, { mtu: 1300 });
  await settled('the MTU back', () => nl.linkTable.get(v4.index)?.mtu === 1420);
  await nl.setLink(v4.index, { up: false });
  await settled('up again', () => nl.linkTable.get(v4.index)?.up === true);
  assert.deepEqual([nl.linkTable.get(v4.index)?.name, nl.linkTable.get(v6.index)?.name], ['flannel-wg', 'flannel-wg-v6'], 'the same devices, not made again');
});

test('the kernel path takes the place of a device of another kind, sets the MTU of its own, and reports a device that vanished', async () => {
  const nl = new FakeNetlink();
  const wg = new FakeWireGuard((name) => [...nl.linkTable.values()].some((l) => l.name === name && linkKind(l) === 'wireguard'));
  const tun = await nl.createLink('flannel-wg', { kind: 'vxlan', vxlan: { vni: 1, port: 0, learning: false, gbp: false } }, {});
  const path = new KernelPath(nl, wg, recordingLogger());
  const index = await path.ensure('flannel-wg', { listenPort: 51820, privateKey: key(1), mtu: 1420 });
  assert.notEqual(index, tun.index);
  assert.equal(linkKind(nl.linkTable.get(index)!), 'wireguard');
  await nl.setLink(index, { mtu: 1300 });
  assert.equal(await path.ensure('flannel-wg', { listenPort: 51821, privateKey: key(1), mtu: 1420 }), index, 'kept');
  assert.deepEqual([nl.linkTable.get(index)?.mtu, (await wg.device('flannel-wg'))?.listenPort], [1420, 51821]);
  assert.equal(path.counters(), undefined);
  path.stop();
  assert.equal(wg.closed, true, 'the port is closed with the path');
  const lost = new KernelPath(nl, new FakeWireGuard(() => false), recordingLogger());
  await assert.rejects(lost.ensure('flannel-wg', { listenPort: 51820, privateKey: key(1), mtu: 1420 }), (err) => errnoOf(err) === 'ENODEV');
});

test('deviceNames: what each mode makes, for the leftovers check', () => {
  assert.deepEqual(wireguardBackend.deviceNames(dual()), ['flannel-wg', 'flannel-wg-v6']);
  assert.deepEqual(wireguardBackend.deviceNames(dual({ Mode: 'auto' })), ['flannel-wg']);
  assert.deepEqual(wireguardBackend.deviceNames(parseNetworkConfig('{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"wireguard"}}')), ['flannel-wg-v6']);
  assert.throws(() => wireguardBackend.checkOptions(dual({ MTU: 1300 })), /IPv6 wireguard device needs an underlay MTU of at least 1360/);
  assert.doesNotThrow(() => wireguardBackend.checkOptions(dual({ MTU: 1360 })));
});
