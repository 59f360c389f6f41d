/** The vxlan backend's decisions against an in-memory kernel: both families, refusals, MAC reuse. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from '../../config/network-config.js';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import type { Lease, LeaseAttrs } from '../../lease/lease.js';
import { FakeNetlink } from '../../testing/fake-netlink.js';
import { leaseFeed } from '../../testing/lease-feed.js';
import { memoryKeys } from '../../testing/memory-keys.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import { waitUntil } from '../../testing/wait.js';
import type { ExternalInterface } from '../external-interface.js';
import { familyPlanes } from '../family-plane.js';
import { vtepMac, vxlanBackend } from './vxlan-backend.js';
import { parseVxlanConfig } from './vxlan-config.js';

const config = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}');
const ext: ExternalInterface = {
  index: 2, name: 'eth0', mtu: 1500,
  ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('203.0.113.1'), ifaceAddr6: parseIp('2001:db8:113::1'), publicIpv6: parseIp('2001:db8:113::1'),
};
const data = (mac: string): string => `{"VNI":1,"VtepMAC":"${mac}"}`;
const peer = (n: number, attrs: Partial<LeaseAttrs> = {}): Lease => ({
  subnet: { ipv4: parseCidr(`198.18.${n}.0/24`), ipv6: parseCidr(`2001:db8:1800:${n}::/64`) },
  attrs: {
    publicIp: parseIp(`203.0.113.${n}`), publicIpv6: parseIp(`2001:db8:113::${n}`), backendType: 'vxlan',
    backendData: data(`0e:00:00:00:04:0${n}`), backendV6Data: data(`0e:00:00:00:06:0${n}`), ...attrs,
  },
});

type TestContext = { after(fn: () => Promise<void> | void): void };

async function network(t: TestContext, previous?: LeaseAttrs, nl = new FakeNetlink()) {
  nl.addrs.push({ index: 2, ip: parseIp('203.0.113.1'), prefix: 24, scope: 0, permanent: true, deprecated: false, temporary: false });
  nl.addrs.push({ index: 2, ip: parseIp('2001:db8:113::1'), prefix: 64, scope: 0, permanent: true, deprecated: false, temporary: false });
  const log = recordingLogger();
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const net = await vxlanBackend.create(config, { netlink: nl, log, extIface: ext, planes: familyPlanes(config, ext), keys: memoryKeys(), ...(previous ? { previous } : {}) }, ctl.signal);
  return { nl, log, net, ctl };
}

test('one device per family, each with its own MAC in BackendData / BackendV6Data, bound to its own underlay address', async (t) => {
  const { nl, net } = await network(t);
  const v4 = await nl.linkByName('flannel.1');
  const v6 = await nl.linkByName('flannel-v6.1');
  const local = (l: typeof v4): bigint | undefined => (l?.details?.kind === 'vxlan' ? l.details.vxlan.local?.value : undefined);
  assert.equal(local(v4), parseIp('203.0.113.1').value);
  assert.equal(local(v6), parseIp('2001:db8:113::1').value);
  assert.equal(net.attrs.backendData, data(v4!.mac!));
  assert.equal(net.attrs.backendV6Data, data(v6!.mac!));
  assert.equal(net.attrs.publicIpv6?.value, parseIp('2001:db8:113::1').value);
  assert.deepEqual([v4!.mtu, v6!.mtu, net.mtu], [1450, 1430, 1430]);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, AbortSignal.timeout(1000));
  assert.deepEqual((await nl.addresses({ index: v6!.index })).map((a) => `${a.prefix}`), ['128']);
  assert.deepEqual((await nl.addresses({ index: v4!.index })).map((a) => `${a.prefix}`), ['32']);
  assert.deepEqual([...nl.noRouterAdvertisements].sort(), ['flannel-v6.1', 'flannel.1'], 'accept_ra 0 on both, as flannel');
});

test('DirectRouting works per family: a peer on the IPv6 underlay\'s subnet gets a plain route via its IPv6 address', async (t) => {
  const direct = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan","DirectRouting":true}}');
  const nl = new FakeNetlink();
  nl.addrs.push({ index: 2, ip: parseIp('203.0.113.1'), prefix: 24, scope: 0, permanent: true, deprecated: false, temporary: false });
  nl.addrs.push({ index: 2, ip: parseIp('2001:db8:113::1'), prefix: 64, scope: 0, permanent: true, deprecated: false, temporary: false });
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  // The kernel's connected routes of the external interface.
  nl.kernel.addRoute({ dst: parseCidr('203.0.113.0/24'), index: 2 });
  nl.kernel.addRoute({ dst: parseCidr('2001:db8:113::/64'), index: 2 });
  const net = await vxlanBackend.create(direct, { netlink: nl, log: recordingLogger(), extIface: ext, planes: familyPlanes(direct, ext), keys: memoryKeys() }, ctl.signal);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  // Peer 4 shares the IPv6 underlay subnet but its IPv4 address is elsewhere: direct over IPv6, vxlan over IPv4.
  feed.push([{ type: 'added', lease: peer(4, { publicIp: parseIp('198.51.100.4') }) }]);
  await waitUntil('both routes', () => nl.routeTable.has('2001:db8:1800:4::/64') && nl.routeTable.has('198.18.4.0/24'));
  const v6route = nl.routeTable.get('2001:db8:1800:4::/64')!;
  assert.equal(v6route.gateway?.value, parseIp('2001:db8:113::4').value);
  assert.equal(v6route.onlink, undefined);
  assert.equal(nl.routeTable.get('198.18.4.0/24')?.index, (await nl.linkByName('flannel.1'))!.index);
  assert.equal(nl.fdbTable.size, 1, 'an FDB entry for the IPv4 side only');
});

test('the MACs this node published before are reused for new devices, per family', async (t) => {
  const { nl } = await network(t, { publicIp: parseIp('203.0.113.1'), backendData: data('0e:aa:00:00:00:04'), backendV6Data: data('0e:aa:00:00:00:06') });
  assert.equal((await nl.linkByName('flannel.1'))?.mac, '0e:aa:00:00:00:04');
  assert.equal((await nl.linkByName('flannel-v6.1'))?.mac, '0e:aa:00:00:00:06');
});

test('a dual-stack peer is programmed on both devices; a bad IPv6 side (multicast VtepMAC) leaves only IPv4', async (t) => {
  const { nl, net, ctl } = await network(t);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([
    { type: 'added', lease: peer(2) },
    { type: 'added', lease: peer(3, { backendV6Data: data('01:00:5e:00:00:01') }) },
  ]);
  const v6 = (await nl.linkByName('flannel-v6.1'))!.index;
  await waitUntil('peer 2 on both devices, peer 3 on IPv4', () => nl.routeTable.size === 3);
  assert.ok(nl.routeTable.has('2001:db8:1800:2::/64') && !nl.routeTable.has('2001:db8:1800:3::/64'));
  assert.equal(nl.routeTable.get('2001:db8:1800:2::/64')?.index, v6);
  assert.equal(nl.fdbTable.get(`${v6} 0e:00:00:00:06:02`)?.dst?.value, parseIp('2001:db8:113::2').value);
  assert.equal(nl.neighTable.get(`${v6} 2001:db8:1800:2::`)?.mac, '0e:00:00:00:06:02');
  assert.ok(![...nl.fdbTable.keys()].some((k) => k.includes('01:00:5e')), 'no FDB entry for a multicast MAC');
});

/** This node's backend running on a kernel with or without nexthop objects, with peer 2 programmed on both devices. */
async function withPeer2(t: TestContext, nexthops: boolean): Promise<{ nl: FakeNetlink; ctl: AbortController }> {
  const nl = new FakeNetlink();
  nl.nexthops = nexthops;
  const { net, ctl } = await network(t, undefined, nl);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(2) }]);
  await waitUntil('peer 2 on both devices', () => nl.routeTable.size === 2);
  return { nl, ctl };
}

test('where the kernel has nexthop objects, a peer\'s IPv4 route goes through one whose id comes from its subnet; its IPv6 route stays plain', async (t) => {
  for (const nexthops of [true, false]) {
    const { nl, ctl } = await withPeer2(t, nexthops);
    const v4 = nl.routeTable.get('198.18.2.0/24');
    assert.equal(v4?.nexthop, nexthops ? 0xf1_000000 + (18 << 16) + (2 << 8) : undefined);
    assert.deepEqual([v4?.gateway?.value, v4?.onlink], [parseIp('198.18.2.0').value, true], 'the gateway and device stay in the route, for the object');
    assert.equal(nl.routeTable.get('2001:db8:1800:2::/64')?.nexthop, undefined);
    ctl.abort();
  }
});

test('a route into the network through one of weft\'s nexthop objects, listed by its id alone (nexthop_compat_mode off), is the backend\'s: no lease wants it, so it goes; one through another program\'s object stays', async (t) => {
  const { nl } = await withPeer2(t, true);
  nl.kernel.addRoute({ dst: parseCidr('198.18.9.0/24'), nexthop: 0xf1_12_09_00 });
  nl.kernel.addRoute({ dst: parseCidr('198.18.8.0/24'), nexthop: 42 });
  await waitUntil('the stray through weft\'s object is gone', () => !nl.routeTable.has('198.18.9.0/24'));
  assert.ok(nl.routeTable.has('198.18.8.0/24') && nl.routeTable.has('198.18.2.0/24'));
});

test('a peer whose lease changes (new VtepMAC, new public IP) leaves none of its old entries behind', async (t) => {
  const { nl, net, ctl } = await network(t);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(2) }]);
  await waitUntil('peer 2 programmed', () => nl.fdbTable.size === 2);
  const v4 = (await nl.linkByName('flannel.1'))!.index;
  feed.push([{ type: 'added', lease: peer(2, { publicIp: parseIp('203.0.113.22'), backendData: data('0e:00:00:00:04:22') }) }]);
  await waitUntil('the new VtepMAC is in', () => nl.fdbTable.has(`${v4} 0e:00:00:00:04:22`));
  assert.equal(nl.fdbTable.has(`${v4} 0e:00:00:00:04:02`), false, 'the old FDB entry is gone');
  assert.equal(nl.fdbTable.get(`${v4} 0e:00:00:00:04:22`)?.dst?.value, parseIp('203.0.113.22').value);
  assert.equal(nl.neighTable.get(`${v4} 198.18.2.0`)?.mac, '0e:00:00:00:04:22');
  assert.equal(nl.fdbTable.size, 2, 'one FDB entry per family, as before');
  feed.push([{ type: 'added', lease: peer(2, { publicIp: parseIp('203.0.113.23'), backendData: data('0e:00:00:00:04:22') }) }]);
  await waitUntil('the FDB entry follows the new public IP', () => nl.fdbTable.get(`${v4} 0e:00:00:00:04:22`)?.dst?.value === parseIp('203.0.113.23').value);
  assert.equal(nl.fdbTable.size, 2);
});

test('Backend.MTU sets the devices\' MTU and FLANNEL_MTU, the interface\'s MTU otherwise', async (t) => {
  const withMtu = parseNetworkConfig('{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","MTU":9000}}');
  const nl = new FakeNetlink();
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const net = await vxlanBackend.create(withMtu, { netlink: nl, log: recordingLogger(), extIface: ext, planes: familyPlanes(withMtu, ext), keys: memoryKeys() }, ctl.signal);
  assert.equal(net.mtu, 8950);
  assert.equal((await nl.linkByName('flannel.1'))?.mtu, 8950);
});

test('a VtepMAC is six octets of a unicast, non-zero MAC; anything else programs nothing', () => {
  const cases: Array<[string | undefined, string | undefined]> = [
    [data('0E-00-00-00-00-01'), '0e:00:00:00:00:01'],
    [data('02:00:00:00:00:00'), '02:00:00:00:00:00'],
    [data('0E:0a-Bc:00-00:FF'), '0e:0a:bc:00:00:ff'],
    [data('0e:00:00:00:00:01 '), undefined],
    [data('0e:000:00:00:00:01'), undefined],
    [data('0e::00:00:00:00:01'), undefined],
    [data('03:00:00:00:00:01'), undefined],
    [data('00:00:00:00:00:00'), undefined],
    [data('ff:ff:ff:ff:ff:ff'), undefined],
    [data('01:00:5e:00:00:01'), undefined],
    [data('33:33:00:00:00:01'), undefined],
    [data('0e:00:00:00:01'), undefined],
    [data('0e:00:00:00:00:01:02'), undefined],
    [data('0e:00:00:00:00:0g'), undefined],
    ['{"VNI":1}', undefined],
    ['{"VtepMAC":12}', undefined],
    ['{"VtepMAC":["0e:00:00:00:00:01"]}', undefined],
    ['[1]', undefined],
    ['not json', undefined],
    [undefined, undefined],
  ];
  for (const [backendData, mac] of cases) assert.equal(vtepMac(backendData), mac, backendData);
});

test('a peer lease carrying this node\'s own VtepMAC is refused for that family, as a duplicate claim', async (t) => {
  const { nl, net, ctl } = await network(t);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const own = (JSON.parse(net.attrs.backendData!) as { VtepMAC: string }).VtepMAC;
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(4, { backendData: data(own) }) }]);
  await waitUntil('the IPv6 side is programmed', () => nl.routeTable.has('2001:db8:1800:4::/64'));
  assert.equal(nl.routeTable.has('198.18.4.0/24'), false);
  assert.match(net.peers()[0]!.reason!, /IPv4: its VtepMAC .* is already claimed by this node/);
});

test('VNI as flannel reads it: 1 when absent or null, an explicit 0 is VNI 0 and device flannel.0', () => {
  const vni = (backend: string): number => parseVxlanConfig(JSON.parse(backend) as Record<string, unknown>).vni;
  assert.equal(vni('{"Type":"vxlan"}'), 1);
  assert.equal(vni('{"Type":"vxlan","VNI":null}'), 1);
  assert.equal(vni('{"Type":"vxlan","VNI":0}'), 0);
  assert.equal(vni('{"Type":"vxlan","vni":4096}'), 4096);
  assert.deepEqual(vxlanBackend.deviceNames(parseNetworkConfig('{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","VNI":0}}')), ['flannel.0']);
});

test('a peer outside the network is programmed and stays written once; with DirectRouting an operator\'s gateway route into the network is left alone', async (t) => {
  const direct = parseNetworkConfig('{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","DirectRouting":true}}');
  const nl = new FakeNetlink();
  nl.addrs.push({ index: 2, ip: parseIp('203.0.113.1'), prefix: 24, scope: 0, permanent: true, deprecated: false, temporary: false });
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const v4ext: ExternalInterface = { index: 2, name: 'eth0', mtu: 1500, ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('203.0.113.1') };
  nl.kernel.addRoute({ dst: parseCidr('203.0.113.0/24'), index: 2 });
  const net = await vxlanBackend.create(direct, { netlink: nl, log: recordingLogger(), extIface: v4ext, planes: familyPlanes(direct, v4ext), keys: memoryKeys() }, ctl.signal);
  const own = { subnet: { ipv4: parseCidr('198.18.1.0/24') }, attrs: net.attrs };
  await net.setLease(own, ctl.signal);
  nl.kernel.addRoute({ dst: parseCidr('198.18.200.0/24'), gateway: parseIp('203.0.113.254'), index: 2 });
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  // A kube podCIDR outside Network, over vxlan (its public IP is off this segment), and a direct peer.
  const outside: Lease = { subnet: { ipv4: parseCidr('198.19.5.0/24') }, attrs: { publicIp: parseIp('198.51.100.5'), backendType: 'vxlan', backendData: data('0e:00:00:00:04:05') } };
  feed.push([{ type: 'added', lease: outside }, { type: 'added', lease: { ...peer(3), subnet: { ipv4: parseCidr('198.18.3.0/24') } } }]);
  await waitUntil('both peers routed', () => nl.routeTable.has('198.19.5.0/24') && nl.routeTable.has('198.18.3.0/24'));
  const writes = nl.writes.length;
  await net.setLease(own, ctl.signal); // a full pass: nothing to repair
  assert.deepEqual(nl.writes.slice(writes), [], 'the route outside the network is weft\'s: not written again');
  assert.equal(nl.routeTable.get('198.18.3.0/24')?.gateway?.value, parseIp('203.0.113.3').value, 'direct');
  assert.ok(nl.routeTable.has('198.18.200.0/24'), 'the operator\'s route stays');
});
