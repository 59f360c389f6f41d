/** The alloc backend: flannel's lease attributes, the interface's MTU, no peers, a liveness pass each period. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from '../../config/network-config.js';
import { type WeftEvents, subscribe } from '../../core/events.js';
import { parseIp } from '../../ip/ip.js';
import type { LeaseEvent } from '../../lease/lease.js';
import { FakeNetlink } from '../../testing/fake-netlink.js';
import { ManualClock, settle } from '../../testing/manual-clock.js';
import { memoryKeys } from '../../testing/memory-keys.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import type { ExternalInterface } from '../external-interface.js';
import { familyPlanes } from '../family-plane.js';
import { allocBackend } from './alloc-backend.js';

const ext: ExternalInterface = { index: 2, name: 'eth0', mtu: 9001, ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('203.0.113.1'), ifaceAddr6: parseIp('2001:db8:113::1'), publicIpv6: parseIp('2001:db8:113::1') };
const deps = (conf: string, clock?: ManualClock) => {
  const config = parseNetworkConfig(conf);
  return { config, deps: { netlink: new FakeNetlink(), log: recordingLogger(), extIface: ext, planes: familyPlanes(config, ext), keys: memoryKeys(), ...(clock ? { clock } : {}) } };
};

test('flannel\'s lease: the public addresses and no BackendType; the interface\'s MTU; no device', async () => {
  const v4 = deps('{"Network":"198.18.0.0/16","Backend":{"Type":"alloc"}}');
  const net = await allocBackend.create(v4.config, v4.deps, AbortSignal.timeout(1000));
  assert.deepEqual(net.attrs, { publicIp: parseIp('203.0.113.1') });
  assert.equal(net.mtu, 9001);
  assert.deepEqual(allocBackend.deviceNames(v4.config), []);
  const only6 = deps('{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"alloc"}}');
  assert.deepEqual((await allocBackend.create(only6.config, only6.deps, AbortSignal.timeout(1000))).attrs, { publicIp: { family: 4, value: 0n }, publicIpv6: parseIp('2001:db8:113::1') });
});

test('run never reads the lease events, passes once a period for the liveness check, and ends when aborted', async () => {
  const clock = new ManualClock();
  const d = deps('{"Network":"198.18.0.0/16","Backend":{"Type":"alloc"}}', clock);
  const net = await allocBackend.create(d.config, d.deps, AbortSignal.timeout(1000));
  const passes: Array<WeftEvents['reconcile']> = [];
  const off = subscribe('reconcile', (m) => passes.push(m));
  let read = false;
  const events: AsyncIterable<LeaseEvent[]> = { [Symbol.asyncIterator]: () => ({ next: async () => ((read = true), { done: true, value: undefined }) }) };
  const ctl = new AbortController();
  const running = net.run(events, ctl.signal);
  await settle();
  assert.equal(passes.length, 1);
  await clock.advance(60_000);
  assert.equal(passes.length, 2, 'one more after a period');
  ctl.abort();
  await running;
  off();
  assert.equal(read, false, 'the watch of the other leases is never started');
  assert.deepEqual([net.peers(), net.packetCounters()], [[], undefined]);
});
