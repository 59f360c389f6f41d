/** The netlink entry kinds: what each lists, and which kernel notifications depart from the desired state. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import type { FdbSpec, NeighbourSpec, NetlinkChange, RouteInfo, RouteSpec } from '../../netlink/netlink.js';
import { FakeNetlink } from '../../testing/fake-netlink.js';
import { EntryIndex } from '../desired-state.js';
import type { EntryKind } from '../entry-kind.js';
import { fdbKind } from './fdb-kind.js';
import { neighbourKind } from './neighbour-kind.js';
import { inClusterScope, routeKind } from './route-kind.js';

const device = 7;
const network = parseCidr('198.18.0.0/16');
const own = parseCidr('198.18.100.0/24');
const nl = new FakeNetlink([{ index: 2, name: 'eth0', mtu: 1500 }, { index: device, name: 'flannel.1', mtu: 1450 }]);
const devices = () => [{ index: device, family: 4 as const }];
const owns = (r: RouteInfo): boolean => r.index === device && inClusterScope(r.dst, network, own);
const route = routeKind({ netlink: nl, families: () => [4], owns });
const neighbour = neighbourKind({ netlink: nl, devices });
const fdb = fdbKind({ netlink: nl, devices });

const peerRoute = (n: number): RouteSpec => ({ dst: parseCidr(`198.18.${n}.0/24`), gateway: parseIp(`198.18.${n}.0`), index: device, onlink: true });
const peerNeighbour = (n: number): NeighbourSpec => ({ index: device, ip: parseIp(`198.18.${n}.0`), mac: `0e:00:00:00:00:0${n}` });
const peerFdb = (n: number): FdbSpec => ({ index: device, mac: `0e:00:00:00:00:0${n}`, dst: parseIp(`203.0.113.${n}`) });
const kernelRoute = (n: number, over: Partial<RouteInfo> = {}): RouteInfo => ({ ...peerRoute(n), type: 'unicast', table: 254, protocol: 3, scope: 0, ...over });

function wanting<T extends object>(kind: EntryKind<T>, entries: T[]): (key: string) => T | undefined {
  const index = new EntryIndex<T>((e) => kind.key(e));
  for (const e of entries) index.add(e);
  return (key) => index.get(key);
}

test('the echo of our own writes is not drift; deletions, different entries and strays in scope are', () => {
  const cases: Array<[string, EntryKind<object>, NetlinkChange, boolean]> = [];
  const r = (what: string, change: NetlinkChange, departs: boolean): void => void cases.push([what, route as EntryKind<object>, change, departs]);
  const n = (what: string, change: NetlinkChange, departs: boolean): void => void cases.push([what, neighbour as EntryKind<object>, change, departs]);
  const f = (what: string, change: NetlinkChange, departs: boolean): void => void cases.push([what, fdb as EntryKind<object>, change, departs]);
  r('our route added', { kind: 'route', deleted: false, entry: kernelRoute(1) }, false);
  r('our route deleted', { kind: 'route', deleted: true, entry: kernelRoute(1) }, true);
  r('our route replaced with another gateway', { kind: 'route', deleted: false, entry: kernelRoute(1, { gateway: parseIp('198.18.9.9') }) }, true);
  r('our route without onlink', { kind: 'route', deleted: false, entry: kernelRoute(1, { onlink: false }) }, true);
  r('our route through another device', { kind: 'route', deleted: false, entry: kernelRoute(1, { index: 3 }) }, true);
  r('our route turned into a blackhole', { kind: 'route', deleted: false, entry: kernelRoute(1, { type: 'blackhole' }) }, true);
  r('a route in another table', { kind: 'route', deleted: true, entry: kernelRoute(1, { table: 255 }) }, false);
  r('an unwanted route on our device', { kind: 'route', deleted: false, entry: kernelRoute(2) }, true);
  r('an unwanted route in our own subnet', { kind: 'route', deleted: false, entry: kernelRoute(100) }, false);
  r('an unrelated route deleted', { kind: 'route', deleted: true, entry: kernelRoute(2, { index: 3 }) }, false);
  r('an unrelated route added', { kind: 'route', deleted: false, entry: kernelRoute(2, { index: 3 }) }, false);
  r('a route the kernel changed in a way we could not read', { kind: 'route', deleted: false }, true);
  r('a neighbour is not a route', { kind: 'neigh', index: device, deleted: true }, false);
  n('our neighbour added', { kind: 'neigh', index: device, deleted: false, entry: { ...peerNeighbour(1), permanent: true } }, false);
  n('our neighbour deleted (no MAC in the message)', { kind: 'neigh', index: device, deleted: true, entry: { index: device, ip: parseIp('198.18.1.0'), permanent: true } }, true);
  n('our neighbour with another MAC', { kind: 'neigh', index: device, deleted: false, entry: { ...peerNeighbour(1), mac: '0e:ff:00:00:00:01', permanent: true } }, true);
  n('our neighbour turned into a learned one', { kind: 'neigh', index: device, deleted: false, entry: { ...peerNeighbour(1), permanent: false } }, true);
  n('a stray permanent neighbour on our device', { kind: 'neigh', index: device, deleted: false, entry: { ...peerNeighbour(5), permanent: true } }, true);
  n('a learned neighbour on our device', { kind: 'neigh', index: device, deleted: false, entry: { ...peerNeighbour(5), permanent: false } }, false);
  n('a neighbour on another device', { kind: 'neigh', index: 3, deleted: true, entry: { index: 3, ip: parseIp('198.18.1.0'), permanent: true } }, false);
  n('a neighbour notification we could not read, on our device', { kind: 'neigh', index: device, deleted: false }, true);
  n('a stray permanent neighbour on another device', { kind: 'neigh', index: 3, deleted: false, entry: { ...peerNeighbour(5), index: 3, permanent: true } }, false);
  n('a route is not a neighbour', { kind: 'route', deleted: true, entry: kernelRoute(1) }, false);
  f('our fdb entry added', { kind: 'fdb', index: device, deleted: false, entry: { ...peerFdb(1), permanent: true, self: true } }, false);
  f('our fdb entry deleted', { kind: 'fdb', index: device, deleted: true, entry: { ...peerFdb(1), permanent: true, self: true } }, true);
  f('an fdb entry of another destination deleted', { kind: 'fdb', index: device, deleted: true, entry: { ...peerFdb(1), dst: parseIp('203.0.113.99'), permanent: true, self: true } }, false);
  f('our fdb entry pointing elsewhere', { kind: 'fdb', index: device, deleted: false, entry: { ...peerFdb(1), dst: parseIp('203.0.113.99'), permanent: true, self: true } }, true);
  f('a stray permanent fdb entry with a destination', { kind: 'fdb', index: device, deleted: false, entry: { ...peerFdb(5), permanent: true, self: true } }, true);
  f('the device MAC entry without a destination', { kind: 'fdb', index: device, deleted: false, entry: { index: device, mac: '0e:aa:00:00:00:00', permanent: true, self: true } }, false);
  f('an fdb entry on another device', { kind: 'fdb', index: 3, deleted: true, entry: { ...peerFdb(1), index: 3, permanent: true, self: true } }, false);
  f('a stray fdb entry on another device', { kind: 'fdb', index: 3, deleted: false, entry: { ...peerFdb(5), index: 3, permanent: true, self: true } }, false);
  f('a learnt (not permanent) fdb entry', { kind: 'fdb', index: device, deleted: false, entry: { ...peerFdb(5), permanent: false, self: true } }, false);
  const want = { route: wanting(route, [peerRoute(1)]), neighbour: wanting(neighbour, [peerNeighbour(1)]), fdb: wanting(fdb, [peerFdb(1)]) };
  for (const [what, kind, change, departs] of cases) assert.equal(kind.departs(change, want[kind.name as keyof typeof want] as (key: string) => object | undefined), departs, what);
});

test('each kind lists only what is in its scope', async () => {
  await nl.replaceRoute(peerRoute(1));
  nl.kernel.addRoute({ dst: parseCidr('203.0.113.0/24'), index: 2 });
  nl.kernel.addRoute(peerRoute(100));
  await nl.replaceNeighbour(peerNeighbour(1));
  await nl.replaceFdb(peerFdb(1));
  await nl.replaceNeighbour({ ...peerNeighbour(2), index: 2 });
  assert.deepEqual([...(await route.list(AbortSignal.timeout(1000)))].map((r) => route.key(r)), ['198.18.1.0/24']);
  assert.deepEqual([...(await neighbour.list(AbortSignal.timeout(1000)))].map((e) => neighbour.key(e)), ['7 198.18.1.0']);
  assert.deepEqual([...(await fdb.list(AbortSignal.timeout(1000)))].map((e) => fdb.key(e)), ['7 0e:00:00:00:00:01']);
});

test('a route in the cluster network and outside the own subnet is in scope; the own subnet and outside are not', () => {
  assert.equal(inClusterScope(parseCidr('198.18.5.0/24'), network, own), true);
  assert.equal(inClusterScope(parseCidr('198.18.100.0/24'), network, own), false);
  assert.equal(inClusterScope(parseCidr('198.18.100.5/32'), network, own), false);
  assert.equal(inClusterScope(parseCidr('198.19.0.0/24'), network, own), false);
  assert.equal(inClusterScope(parseCidr('198.18.5.0/24'), undefined, own), false);
  assert.equal(inClusterScope(parseCidr('198.18.100.0/24'), network, undefined), true);
});

test('what each kind counts as the same entry', () => {
  const gw = parseIp('198.18.1.0');
  const dst = parseCidr('198.18.1.0/24');
  const cases: Array<[string, RouteSpec, RouteSpec, boolean]> = [
    ['the same route', { dst, gateway: gw, index: device, onlink: true }, { dst, gateway: gw, index: device, onlink: true }, true],
    ['a wanted route without a device matches one through any device (DirectRouting)', { dst, gateway: gw }, { dst, gateway: gw, index: 2 }, true],
    ['another gateway', { dst, gateway: gw }, { dst, gateway: parseIp('198.18.1.9') }, false],
    ['a gateway where none is wanted', { dst, index: device }, { dst, gateway: gw, index: device }, false],
    ['no gateway where one is wanted', { dst, gateway: gw, index: device }, { dst, index: device }, false],
    ['neither has a gateway', { dst, index: device }, { dst, index: device }, true],
    ['another destination', { dst, index: device }, { dst: parseCidr('198.18.2.0/24'), index: device }, false],
    ['another device', { dst, index: device }, { dst, index: 2 }, false],
    ['onlink where it is not wanted', { dst, gateway: gw, index: device }, { dst, gateway: gw, index: device, onlink: true }, false],
    ['a blackhole where a unicast route is wanted', { dst }, { dst, type: 'blackhole' }, false],
    ['unicast written out or left to the default', { dst, type: 'unicast' }, { dst }, true],
    ['through the wanted nexthop object, listed with its gateway and device', { dst, gateway: gw, index: device, onlink: true, nexthop: 7 }, { dst, gateway: gw, index: device, onlink: true, nexthop: 7 }, true],
    ['through the wanted object, listed by its id alone (nexthop_compat_mode off)', { dst, gateway: gw, index: device, onlink: true, nexthop: 7 }, { dst, nexthop: 7 }, true],
    ['through another object', { dst, gateway: gw, index: device, onlink: true, nexthop: 7 }, { dst, gateway: gw, index: device, onlink: true, nexthop: 8 }, false],
    ['through the wanted object, re-pointed by hand', { dst, gateway: gw, index: device, onlink: true, nexthop: 7 }, { dst, gateway: parseIp('198.18.1.9'), index: device, onlink: true, nexthop: 7 }, false],
    ['the plain route (flanneld\'s) where an object is wanted', { dst, gateway: gw, index: device, onlink: true, nexthop: 7 }, { dst, gateway: gw, index: device, onlink: true }, false],
    ['a route through an object where a plain one is wanted', { dst, gateway: gw, index: device, onlink: true }, { dst, gateway: gw, index: device, onlink: true, nexthop: 7 }, false],
  ];
  for (const [what, want, have, same] of cases) assert.equal(route.matches(want, have), same, what);
  assert.equal(neighbour.matches(peerNeighbour(1), { ...peerNeighbour(1), mac: '0e:ff:00:00:00:01' }), false, 'a neighbour with another MAC');
  assert.equal(neighbour.matches(peerNeighbour(1), peerNeighbour(1)), true);
  assert.equal(fdb.matches(peerFdb(1), { ...peerFdb(1), dst: parseIp('203.0.113.9') }), false, 'an FDB entry to another peer');
  assert.equal(fdb.matches(peerFdb(1), peerFdb(1)), true);
});

test('with two managed devices (dual-stack), a change on either is judged; on any other device, never', () => {
  const two = () => [{ index: device, family: 4 as const }, { index: 8, family: 6 as const }];
  const n = neighbourKind({ netlink: nl, devices: two });
  const f = fdbKind({ netlink: nl, devices: two });
  const none = (): undefined => undefined;
  const stray6 = { index: 8, ip: parseIp('2001:db8:1800:5::'), mac: '0e:00:00:00:06:05', permanent: true };
  assert.equal(n.departs({ kind: 'neigh', index: 8, deleted: false, entry: stray6 }, none), true, 'a stray on the second device');
  assert.equal(n.departs({ kind: 'neigh', index: 3, deleted: false, entry: { ...stray6, index: 3 } }, none), false, 'a permanent entry on an unmanaged device');
  assert.equal(n.departs({ kind: 'neigh', index: 3, deleted: false }, none), false, 'even one that could not be read');
  const fdbStray = { index: 8, mac: '0e:00:00:00:06:05', dst: parseIp('2001:db8:113::5'), permanent: true, self: true };
  assert.equal(f.departs({ kind: 'fdb', index: 8, deleted: false, entry: fdbStray }, none), true);
  assert.equal(f.departs({ kind: 'fdb', index: 3, deleted: false, entry: { ...fdbStray, index: 3 } }, none), false);
  assert.equal(f.departs({ kind: 'fdb', index: 8, deleted: false }, none), true, 'an unreadable FDB notification on a managed device');
  assert.equal(f.departs({ kind: 'neigh', index: 8, deleted: false, entry: stray6 }, none), false, 'a neighbour is not an FDB entry');
  assert.equal(n.departs({ kind: 'fdb', index: 8, deleted: false, entry: fdbStray }, none), false, 'and the other way round');
  assert.equal(route.departs({ kind: 'fdb', index: 8, deleted: false, entry: fdbStray }, none), false);
  // A wanted FDB entry that the kernel now shows without its destination, or not permanent.
  const want = wanting(f, [{ index: 8, mac: fdbStray.mac, dst: fdbStray.dst }]);
  const { dst: _, ...noDst } = fdbStray;
  assert.equal(f.departs({ kind: 'fdb', index: 8, deleted: false, entry: noDst }, want), true);
  assert.equal(f.departs({ kind: 'fdb', index: 8, deleted: true, entry: noDst }, want), false, 'the deletion of an entry that was never ours');
  const wantN = wanting(n, [{ index: 8, ip: stray6.ip, mac: stray6.mac }]);
  assert.equal(n.departs({ kind: 'neigh', index: 8, deleted: true, entry: { index: 8, ip: stray6.ip, permanent: true } }, wantN), true);
  assert.equal(n.departs({ kind: 'neigh', index: 8, deleted: true, entry: { index: 8, ip: parseIp('2001:db8:1800:6::'), permanent: true } }, wantN), false, 'the deletion of one we do not want');
});

test('listings leave out what is not the backend\'s: learnt neighbours, FDB entries without a destination or not permanent', async () => {
  const k = new FakeNetlink([{ index: device, name: 'flannel.1', mtu: 1450 }]);
  const n = neighbourKind({ netlink: k, devices });
  const f = fdbKind({ netlink: k, devices });
  k.kernel.addNeighbour({ ...peerNeighbour(1), permanent: true });
  k.kernel.addNeighbour({ ...peerNeighbour(2), permanent: false });
  k.kernel.addFdb({ ...peerFdb(1), permanent: true, self: true });
  k.kernel.addFdb({ ...peerFdb(2), permanent: false, self: true });
  k.kernel.addFdb({ index: device, mac: '0e:aa:00:00:00:00', permanent: true, self: true });
  assert.deepEqual([...(await n.list(AbortSignal.timeout(1000)))].map((e) => n.key(e)), ['7 198.18.1.0']);
  assert.deepEqual([...(await f.list(AbortSignal.timeout(1000)))], [peerFdb(1)], 'just the index, MAC and destination');
});
