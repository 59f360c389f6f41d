import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import type { NetlinkChange, RouteInfo } from '../netlink/netlink.js';
import { type ChangeScope, DesiredState, EntryIndex, type PeerProgram, fdbKey } from './desired-state.js';

const device = 7;
const network = parseCidr('198.18.0.0/16');
const external = 2;
const scope: ChangeScope = {
  devices: () => [{ index: device, family: 4 }],
  links: () => [device, external],
  ownsRoute: (r) => r.index === device && network.prefix <= r.dst.prefix && (r.dst.ip.value >> 16n) === (network.ip.value >> 16n),
};

function peer(n: number, mac = `0e:00:00:00:00:0${n}`): PeerProgram {
  const vtep = parseIp(`198.18.${n}.0`);
  return {
    neighbours: [{ index: device, ip: vtep, mac }],
    fdb: [{ index: device, mac, dst: parseIp(`203.0.113.${n}`) }],
    routes: [{ dst: parseCidr(`198.18.${n}.0/24`), gateway: vtep, index: device, onlink: true }],
  };
}

const kernelRoute = (n: number, over: Partial<RouteInfo> = {}): RouteInfo => ({
  dst: parseCidr(`198.18.${n}.0/24`), gateway: parseIp(`198.18.${n}.0`), index: device, onlink: true, type: 'unicast', table: 254, protocol: 3, scope: 0, ...over,
});

test('the echo of our own writes is not drift, nor are pods coming and going; deletions, different entries and our links changing are', () => {
  const want = new DesiredState();
  want.add(peer(1));
  const cases: Array<[string, NetlinkChange, boolean]> = [
    ['our route added', { kind: 'route', deleted: false, entry: kernelRoute(1) }, false],
    ['our route deleted', { kind: 'route', deleted: true, entry: kernelRoute(1) }, true],
    ['our route replaced with another gateway', { kind: 'route', deleted: false, entry: kernelRoute(1, { gateway: parseIp('198.18.9.9') }) }, true],
    ['a route in another table', { kind: 'route', deleted: true, entry: kernelRoute(1, { table: 255 }) }, false],
    ['an unwanted route on our device', { kind: 'route', deleted: false, entry: kernelRoute(2) }, true],
    ['an unrelated route deleted', { kind: 'route', deleted: true, entry: kernelRoute(2, { index: 3 }) }, false],
    ['an unrelated route added', { kind: 'route', deleted: false, entry: kernelRoute(2, { index: 3 }) }, false],
    ['an unparsable notification', { kind: 'route', deleted: false }, true],
    ['our neighbour added', { kind: 'neigh', index: device, deleted: false, entry: { index: device, ip: parseIp('198.18.1.0'), mac: '0e:00:00:00:00:01', permanent: true } }, false],
    ['our neighbour deleted (no MAC in the message)', { kind: 'neigh', index: device, deleted: true, entry: { index: device, ip: parseIp('198.18.1.0'), permanent: true } }, true],
    ['our neighbour with another MAC', { kind: 'neigh', index: device, deleted: false, entry: { index: device, ip: parseIp('198.18.1.0'), mac: '0e:ff:00:00:00:01', permanent: true } }, true],
    ['a stray permanent neighbour on our device', { kind: 'neigh', index: device, deleted: false, entry: { index: device, ip: parseIp('198.18.5.0'), mac: '0e:ff:00:00:00:05', permanent: true } }, true],
    ['a learned neighbour on our device', { kind: 'neigh', index: device, deleted: false, entry: { index: device, ip: parseIp('198.18.5.0'), mac: '0e:ff:00:00:00:05', permanent: false } }, false],
    ['a neighbour on another device', { kind: 'neigh', index: 3, deleted: true, entry: { index: 3, ip: parseIp('198.18.1.0'), permanent: true } }, false],
    ['our fdb entry added', { kind: 'fdb', index: device, deleted: false, entry: { index: device, mac: '0e:00:00:00:00:01', dst: parseIp('203.0.113.1'), permanent: true, self: true } }, false],
    ['our fdb entry deleted', { kind: 'fdb', index: device, deleted: true, entry: { index: device, mac: '0e:00:00:00:00:01', dst: parseIp('203.0.113.1'), permanent: true, self: true } }, true],
    ['our fdb entry pointing elsewhere', { kind: 'fdb', index: device, deleted: false, entry: { index: device, mac: '0e:00:00:00:00:01', dst: parseIp('203.0.113.99'), permanent: true, self: true } }, true],
    ['the device MAC entry without a destination', { kind: 'fdb', index: device, deleted: false, entry: { index: device, mac: '0e:aa:00:00:00:00', permanent: true, self: true } }, false],
    ['our device deleted', { kind: 'link', index: device, deleted: true }, true],
    ['the external interface changed (down, say)', { kind: 'link', index: external, deleted: false }, true],
    ['an address of the external interface removed', { kind: 'addr', index: external, deleted: true }, true],
    ['a pod veth added', { kind: 'link', index: 40, deleted: false }, false],
    ['an address on a pod veth', { kind: 'addr', index: 40, deleted: false }, false],
  ];
  for (const [what, change, departs] of cases) assert.equal(want.departs(change, scope), departs, what);
});

test('removing a peer forgets exactly its entries', () => {
  const want = new DesiredState();
  const one = peer(1);
  const two = peer(2);
  want.add(one);
  want.add(two);
  want.remove(one);
  assert.deepEqual([...want.routes].map(([key]) => key), ['198.18.2.0/24']);
  assert.equal(want.neighbours.size, 1);
  assert.equal(want.fdb.size, 1);
  assert.equal(want.departs({ kind: 'route', deleted: true, entry: kernelRoute(1) }, scope), false);
});

test('two peers under one key: the later one counts, and removing it brings back the earlier', () => {
  const index = new EntryIndex<{ index: number; mac: string; dst: string }>(fdbKey);
  const first = { index: device, mac: '0e:00:00:00:00:01', dst: 'a' };
  const second = { index: device, mac: '0e:00:00:00:00:01', dst: 'b' };
  index.add(first);
  index.add(second);
  assert.equal(index.size, 1);
  assert.equal(index.get(fdbKey(first)), second);
  index.remove(second);
  assert.equal(index.get(fdbKey(first)), first);
  index.remove({ ...first }); // not this very entry: nothing happens
  assert.equal(index.get(fdbKey(first)), first);
  index.remove(first);
  assert.equal(index.has(fdbKey(first)), false);
});
