/** The host-gw backend's decisions against an in-memory kernel. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isWeftError } from '../../core/errors.js';
import { parseNetworkConfig } from '../../config/network-config.js';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import type { Lease } from '../../lease/lease.js';
import { FakeNetlink } from '../../testing/fake-netlink.js';
import { leaseFeed } from '../../testing/lease-feed.js';
import { memoryKeys } from '../../testing/memory-keys.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import { waitUntil } from '../../testing/wait.js';
import type { ExternalInterface } from '../external-interface.js';
import { familyPlanes } from '../family-plane.js';
import { hostGwBackend } from './host-gw-backend.js';

const config = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"host-gw"}}');
const ext: ExternalInterface = {
  index: 2, name: 'eth0', mtu: 1500,
  ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('203.0.113.1'), ifaceAddr6: parseIp('2001:db8:113::1'), publicIpv6: parseIp('2001:db8:113::1'),
};
const peer = (n: number, publicIp = `203.0.113.${n}`): Lease => ({
  subnet: { ipv4: parseCidr(`198.18.${n}.0/24`), ipv6: parseCidr(`2001:db8:1800:${n}::/64`) },
  attrs: { publicIp: parseIp(publicIp), publicIpv6: parseIp(`2001:db8:113::${n}`), backendType: 'host-gw' },
});

function kernel(): FakeNetlink {
  const nl = new FakeNetlink();
  nl.addrs.push({ index: 2, ip: parseIp('203.0.113.1'), prefix: 24, scope: 0, permanent: true, deprecated: false, temporary: false });
  nl.addrs.push({ index: 2, ip: parseIp('2001:db8:113::1'), prefix: 64, scope: 0, permanent: true, deprecated: false, temporary: false });
  return nl;
}

test('routes to each family\'s subnet via the peer\'s address of that family; a peer off the L2 segment is refused for that family', async (t) => {
  const nl = kernel();
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const net = await hostGwBackend.create(config, { netlink: nl, log: recordingLogger(), extIface: ext, planes: familyPlanes(config, ext), keys: memoryKeys() }, ctl.signal);
  assert.equal(net.mtu, 1500);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(2) }, { type: 'added', lease: peer(3, '198.51.100.3') }]);
  await waitUntil('peer 2 in both families, peer 3 over IPv6 only', () => nl.routeTable.size === 3);
  assert.equal(nl.routeTable.get('198.18.2.0/24')?.gateway?.value, parseIp('203.0.113.2').value);
  assert.equal(nl.routeTable.get('2001:db8:1800:2::/64')?.gateway?.value, parseIp('2001:db8:113::2').value);
  assert.ok(nl.routeTable.has('2001:db8:1800:3::/64') && !nl.routeTable.has('198.18.3.0/24'));
});

test('a public address that is not the interface\'s (NAT) is refused at start, as flannel does', async () => {
  const natted = { ...ext, publicIpv6: parseIp('2001:db8:113::99') };
  await assert.rejects(
    hostGwBackend.create(config, { netlink: kernel(), log: recordingLogger(), extIface: natted, planes: familyPlanes(config, natted), keys: memoryKeys() }, AbortSignal.timeout(1000)),
    (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /your PublicIP differs from interface IP/.test(err.message),
  );
});

test('host-gw makes no device: every flannel device is a leftover to remove after a switch to it', () => {
  assert.deepEqual(hostGwBackend.deviceNames(parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"host-gw"}}')), []);
});

/** A host-gw network with this node's lease 198.18.1.0/24 (and its IPv6 one), not yet running. */
async function leased(t: { after(fn: () => unknown): void }) {
  const nl = kernel();
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const net = await hostGwBackend.create(config, { netlink: nl, log: recordingLogger(), extIface: ext, planes: familyPlanes(config, ext), keys: memoryKeys() }, ctl.signal);
  const own = { subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs };
  await net.setLease(own, ctl.signal);
  return { nl, net, own, ctl };
}

test('only routes weft wrote are its own: an operator\'s static route into the network stays; a flanneld route to a live peer is kept as it is and goes with its lease', async (t) => {
  const { nl, net, own, ctl } = await leased(t);
  // An operator's (or BGP's, DHCP's) route into the wide network, and flanneld's route to peer 2: both `proto boot`.
  nl.kernel.addRoute({ dst: parseCidr('198.18.200.0/24'), gateway: parseIp('203.0.113.254'), index: 2 });
  nl.kernel.addRoute({ dst: parseCidr('198.18.2.0/24'), gateway: parseIp('203.0.113.2'), index: 2 });
  // A route weft wrote for a peer that is gone.
  await nl.replaceRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('203.0.113.9'), index: 2 });
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(2) }]);
  await waitUntil('peer 2 programmed and the stale route gone', () => nl.routeTable.has('2001:db8:1800:2::/64') && !nl.routeTable.has('198.18.9.0/24'));
  await net.setLease(own, ctl.signal); // one more full pass
  assert.equal(nl.routeTable.get('198.18.200.0/24')?.protocol, 3, 'the operator\'s route is left as it was');
  assert.equal(nl.routeTable.get('198.18.2.0/24')?.gateway?.value, parseIp('203.0.113.2').value, 'the live peer\'s route, as the lease wants it, is left as it is');
  assert.ok(!nl.writes.includes('replaceRoute 198.18.2.0/24'), 'not written again');
  feed.push([{ type: 'removed', lease: peer(2) }]);
  await waitUntil('peer 2\'s route goes with its lease', () => !nl.routeTable.has('198.18.2.0/24'));
  assert.ok(nl.routeTable.has('198.18.200.0/24'));
});

test('another network\'s agent on the host: its host-gw routes (weft\'s protocol, via the same interface, into its own network) are not this agent\'s to remove', async (t) => {
  const { nl, net, own, ctl } = await leased(t);
  await nl.replaceRoute({ dst: parseCidr('198.19.2.0/24'), gateway: parseIp('203.0.113.2'), index: 2 }); // the other agent's, 198.19.0.0/16
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(3) }]);
  await waitUntil('peer 3 programmed', () => nl.routeTable.has('198.18.3.0/24'));
  await net.setLease(own, ctl.signal); // a full pass
  assert.ok(nl.routeTable.has('198.19.2.0/24'));
});

test('weft\'s own routes are the gateway routes it wrote on the external interface: one without a gateway, or via another interface, stays though it carries weft\'s protocol', async (t) => {
  const { nl, net, own, ctl } = await leased(t);
  await nl.replaceRoute({ dst: parseCidr('198.18.7.0/24'), index: 2 });
  await nl.replaceRoute({ dst: parseCidr('198.18.8.0/24'), gateway: parseIp('203.0.113.8'), index: 5 });
  await nl.replaceRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('203.0.113.9'), index: 2 }); // weft's, for a peer that is gone
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(3) }]);
  await waitUntil('peer 3 programmed and the stale route gone', () => nl.routeTable.has('198.18.3.0/24') && !nl.routeTable.has('198.18.9.0/24'));
  await net.setLease(own, ctl.signal); // a full pass
  assert.ok(nl.routeTable.has('198.18.7.0/24'), 'a route without a gateway is not a host-gw route');
  assert.ok(nl.routeTable.has('198.18.8.0/24'), 'a route via another interface is not this backend\'s');
});

test('a peer is on the segment when its address is in any subnet of the interface; a link-scope address makes no segment', async (t) => {
  const nl = kernel();
  nl.addrs.push({ index: 2, ip: parseIp('198.51.100.1'), prefix: 24, scope: 0, permanent: true, deprecated: false, temporary: false });
  nl.addrs.push({ index: 2, ip: parseIp('2001:db8:ff::1'), prefix: 64, scope: 253, permanent: true, deprecated: false, temporary: false });
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const net = await hostGwBackend.create(config, { netlink: nl, log: recordingLogger(), extIface: ext, planes: familyPlanes(config, ext), keys: memoryKeys() }, ctl.signal);
  await net.setLease({ subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('2001:db8:1800:1::/64') }, attrs: net.attrs }, ctl.signal);
  const feed = leaseFeed(ctl.signal);
  const running = net.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(() => running);
  const second: Lease = { subnet: { ipv4: parseCidr('198.18.3.0/24'), ipv6: parseCidr('2001:db8:1800:3::/64') }, attrs: { publicIp: parseIp('198.51.100.3'), publicIpv6: parseIp('2001:db8:ff::3'), backendType: 'host-gw' } };
  feed.push([{ type: 'added', lease: second }, { type: 'added', lease: peer(2) }]);
  await waitUntil('peer 2 in both families', () => nl.routeTable.has('2001:db8:1800:2::/64') && nl.routeTable.has('198.18.2.0/24'));
  await waitUntil('the second peer over IPv4, on the interface\'s second subnet', () => nl.routeTable.has('198.18.3.0/24'));
  assert.ok(!nl.routeTable.has('2001:db8:1800:3::/64'), 'not over IPv6: its address is only in a link-scope subnet');
});
