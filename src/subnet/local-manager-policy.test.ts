/**
 * Which subnet the manager takes, over an in-memory registry holding what a hostile or careless
 * writer left there: stray keys of another length, a lease planted with this node's public IP,
 * an operator's reservation, a family added to or dropped from the config.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe } from '../core/events.js';
import { isWeftError } from '../core/errors.js';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import { type LeaseAttrs, type SubnetPair, formatSubnetPair } from '../lease/lease.js';
import { ManualClock, settle } from '../testing/manual-clock.js';
import { MemoryRegistry } from '../testing/memory-registry.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { LocalManager } from './local-manager.js';

const day = 24 * 3600;
const v4 = '{"Network":"198.18.0.0/22","SubnetLen":24,"Backend":{"Type":"vxlan"}}';
const dual = '{"Network":"198.18.0.0/22","SubnetLen":24,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","IPv6SubnetLen":64,"Backend":{"Type":"vxlan"}}';
const attrsFor = (n: number, v6 = false): LeaseAttrs => ({
  publicIp: parseIp(`203.0.113.${n}`),
  ...(v6 ? { publicIpv6: parseIp(`2001:db8:113::${n}`) } : {}),
  backendType: 'vxlan',
});
const pair = (ipv4: string, ipv6?: string): SubnetPair => ({ ipv4: parseCidr(ipv4), ...(ipv6 ? { ipv6: parseCidr(ipv6) } : {}) });
const keys = (registry: MemoryRegistry): string[] => registry.leases().map((l) => formatSubnetPair(l.subnet));

function setup(t: { after(fn: () => void): void }, config = v4) {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock, config });
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const manager = (previous?: SubnetPair): LocalManager =>
    new LocalManager({ registry, log: recordingLogger(), clock, random: () => 0, ...(previous ? { previous } : {}) });
  return { clock, registry, manager, signal: ctl.signal };
}

test('a key no peer would program (a -16, larger than the network) blocks no allocation; a -25, which peers program, blocks its /24', async (t) => {
  const { registry, manager, signal } = setup(t);
  registry.write(pair('198.18.1.0/24'), attrsFor(11), day);
  registry.write(pair('198.18.2.0/24'), attrsFor(12), day);
  registry.write(pair('198.18.0.0/16'), attrsFor(99));
  const lease = await manager().acquireLease(attrsFor(1), signal);
  assert.equal(formatSubnetPair(lease.subnet), '198.18.3.0/24');
  registry.remove(lease.subnet);
  registry.write(pair('198.18.3.128/25'), attrsFor(98));
  await assert.rejects(manager().acquireLease(attrsFor(2), signal), (err) => isWeftError(err, 'WEFT_ERR_OUT_OF_SUBNETS') && err.message.includes('3 leases hold a place'));
});

test('out of subnets names leases that hold the places, and counts only those', async (t) => {
  const { registry, manager, signal } = setup(t);
  for (const n of [1, 2, 3]) registry.write(pair(`198.18.${n}.0/24`), attrsFor(10 + n), day);
  registry.write(pair('198.18.0.0/16'), attrsFor(99));
  await assert.rejects(manager().acquireLease(attrsFor(1), signal), (err) => {
    return isWeftError(err, 'WEFT_ERR_OUT_OF_SUBNETS') && err.message.includes('3 leases hold a place') && err.message.includes('198.18.1.0/24');
  });
});

test('a lease planted with this node\'s public IP does not move it off the subnet subnet.env names, held or free', async (t) => {
  const { registry, manager, signal } = setup(t);
  const own = await manager().acquireLease(attrsFor(1), signal);
  assert.equal(formatSubnetPair(own.subnet), '198.18.1.0/24');
  registry.write(pair('198.18.3.0/24'), attrsFor(1), day); // planted, newer
  const counts: number[] = [];
  const off = subscribe('lease.duplicates', (m) => counts.push(m.count));
  t.after(off);
  // A restart while its own lease still stands.
  const again = await manager(own.subnet).acquireLease(attrsFor(1), signal);
  assert.equal(formatSubnetPair(again.subnet), '198.18.1.0/24');
  assert.deepEqual(counts, [2], 'two leases carry its public IP, reported');
  // Its lease expired or was deleted: subnet.env's subnet is free, so it is taken again.
  registry.remove(own.subnet);
  const back = await manager(own.subnet).acquireLease(attrsFor(1), signal);
  assert.equal(formatSubnetPair(back.subnet), '198.18.1.0/24');
  assert.deepEqual(keys(registry), ['198.18.1.0/24', '198.18.3.0/24'], 'the planted lease is left alone');
});

test('a held lease deleted behind the manager is taken back on its subnet, not on a planted one', async (t) => {
  const { registry, manager, signal } = setup(t);
  const m = manager();
  const own = await m.acquireLease(attrsFor(1), signal);
  const yielded: string[] = [];
  void (async () => {
    for await (const l of m.holdLease(signal)) yielded.push(formatSubnetPair(l.subnet));
  })().catch(() => undefined);
  await settle();
  registry.write(pair('198.18.3.0/24'), attrsFor(1)); // planted without TTL, as a reservation is
  registry.remove(own.subnet);
  for (let i = 0; i < 20 && yielded.length === 0; i++) await settle();
  assert.deepEqual(yielded, ['198.18.1.0/24']);
});

test('without subnet.env, the oldest lease carrying this public IP is reused (flannel\'s rule)', async (t) => {
  const { registry, manager, signal } = setup(t);
  registry.write(pair('198.18.2.0/24'), attrsFor(1), day); // older
  registry.write(pair('198.18.1.0/24'), attrsFor(1), day); // newer, first in key order
  const lease = await manager().acquireLease(attrsFor(1), signal);
  assert.equal(formatSubnetPair(lease.subnet), '198.18.2.0/24');
});

test('at start, an operator\'s reservation beats subnet.env\'s free subnet, but not the node\'s own standing lease', async (t) => {
  const { registry, manager, signal } = setup(t);
  registry.write(pair('198.18.3.0/24'), attrsFor(5)); // a reservation for node 5
  const moved = await manager(pair('198.18.1.0/24')).acquireLease(attrsFor(5), signal);
  assert.equal(formatSubnetPair(moved.subnet), '198.18.3.0/24');
  assert.equal(registry.leases().find((l) => formatSubnetPair(l.subnet) === '198.18.3.0/24')?.ttlLease, '0', 'still a reservation');
  registry.write(pair('198.18.2.0/24'), attrsFor(6), day); // node 6's lease
  registry.write(pair('198.18.1.0/24'), attrsFor(6)); // and a reservation planted for it
  const kept = await manager(pair('198.18.2.0/24')).acquireLease(attrsFor(6), signal);
  assert.equal(formatSubnetPair(kept.subnet), '198.18.2.0/24');
});

test('turning EnableIPv6 on keeps the IPv4 subnet, and off again keeps it too', async (t) => {
  const { registry, manager, signal } = setup(t);
  const first = await manager().acquireLease(attrsFor(1, true), signal);
  registry.write(pair('198.18.2.0/24'), attrsFor(2), day);
  registry.config = dual;
  const both = await manager(first.subnet).acquireLease(attrsFor(1, true), signal);
  assert.equal(formatSubnetPair(both.subnet), `${formatSubnetPair(first.subnet)},2001:db8:1800:1::/64`);
  assert.deepEqual(keys(registry), ['198.18.1.0/24,2001:db8:1800:1::/64', '198.18.2.0/24'], 'the IPv4-only key is gone');
  // Off again, and no subnet.env (a re-imaged node): found by public IP, IPv4 part kept.
  registry.config = v4;
  const back = await manager().acquireLease(attrsFor(1), signal);
  assert.equal(formatSubnetPair(back.subnet), formatSubnetPair(first.subnet));
  assert.deepEqual(keys(registry), ['198.18.1.0/24', '198.18.2.0/24']);
});

test('a lease found only by a public IP that is not this host\'s is refused, unless subnet.env names it', async (t) => {
  const { clock, registry, signal } = setup(t);
  registry.write(pair('198.18.2.0/24'), attrsFor(7), day); // node 7's lease
  const manager = (isLocal: boolean, previous?: SubnetPair): LocalManager =>
    new LocalManager({ registry, log: recordingLogger(), clock, random: () => 0, isLocalAddress: () => isLocal, ...(previous ? { previous } : {}) });
  await assert.rejects(manager(false).acquireLease(attrsFor(7), signal), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /carries this node's public IP 203\.0\.113\.7, which is not an address of this host/.test(err.message));
  assert.equal(formatSubnetPair((await manager(false, pair('198.18.2.0/24')).acquireLease(attrsFor(7), signal)).subnet), '198.18.2.0/24', 'behind NAT, restarted');
  assert.equal(formatSubnetPair((await manager(true).acquireLease(attrsFor(7), signal)).subnet), '198.18.2.0/24', 'its own address: a reinstalled node');
});

test('node addresses inside the network: no subnet that holds this node\'s or a peer\'s public IP is handed out', async (t) => {
  const { registry, manager, signal } = setup(t);
  // Network 198.18.0.0/22 (subnets 1, 2 and 3): this node lives at 198.18.1.5, a peer at 198.18.2.7.
  registry.write(pair('198.18.0.0/25'), { publicIp: parseIp('198.18.2.7'), backendType: 'vxlan' });
  const lease = await manager().acquireLease({ ...attrsFor(1), publicIp: parseIp('198.18.1.5') }, signal);
  assert.equal(formatSubnetPair(lease.subnet), '198.18.3.0/24');
});

test('the health check answers from holdLease\'s watch while it runs, with the registry\'s word on its liveness, and reads only without one', async (t) => {
  const { registry, manager, signal } = setup(t);
  const m = manager();
  const lease = await m.acquireLease(attrsFor(1), signal);
  registry.calls.length = 0;
  assert.equal((await m.checkLease(signal)).held, true);
  assert.deepEqual(registry.calls, ['getLeases'], 'no watch yet: the check reads the lease');

  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const holding = m.holdLease(AbortSignal.any([signal, ctl.signal]))[Symbol.asyncIterator]().next();
  holding.catch(() => undefined);
  await settle();
  registry.aliveAt = 4242;
  registry.calls.length = 0;
  assert.deepEqual(await m.checkLease(signal), { held: true, confirmedAt: 4242 });
  assert.deepEqual(registry.calls, [], 'answered from the watch');

  // Another writer changes the key and the rewrite fails: not held, until ours is back.
  registry.failNext('updateLease', 'WEFT_ERR_UNAVAILABLE', 1000);
  registry.write(lease.subnet, attrsFor(9), day);
  await settle();
  assert.equal((await m.checkLease(signal)).held, false);
  ctl.abort();
  await holding;
  registry.calls.length = 0;
  await m.checkLease(signal);
  assert.deepEqual(registry.calls, ['getLeases'], 'the watch ended: the check reads again');
});
