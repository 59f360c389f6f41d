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
  n('a route is not a neighbour', { kind: 'route', deleted: true, entry: kernelRoute(1) }, false);
  f('our fdb entry added', { kind: 'fdb', index: device, deleted: false, entry: { ...peerFdb(1), permanent: true, self: true } }, false);
  f('our fdb entry deleted', { kind: 'fdb', index: device, deleted: true, entry: { ...peerFdb(1), permanent: true, self: true } }, true);
  f('an fdb entry of another destination deleted', { kind: 'fdb', index: device, deleted: true, entry: { ...peerFdb(1), dst: parseIp('203.0.113.99'), permanent: true, self: true } }, false);
  f('our fdb entry pointing elsewhere', { kind: 'fdb', index: device, deleted: false, entry: { ...peerFdb(1), dst: parseIp('203.0.113.99'), permanent: true, self: true } }, true);
  f('a stray permanent fdb entry with a destination', { kind: 'fdb', index: device, deleted: false, entry: { ...peerFdb(5), permanent: true, self: true } }, true);
  f('the device MAC entry without a destination', { kind: 'fdb', index: device, deleted: false, entry: { index: device, mac: '0e:aa:00:00:00:00', permanent: true, self: true } }, false);
  f('an fdb entry on another device', { kind: 'fdb', index: 3, deleted: true, entry: { ...peerFdb(1), index: 3, permanent: true, self: true } }, false);
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
