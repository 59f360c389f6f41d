/**
 * The subnet manager's timing policy on a manual clock over an in-memory registry: when a lease
 * is renewed, how failed renewals back off and start over, how a lost lease comes back. The same
 * manager against a real etcd is local-manager.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '../core/errors.js';
import { parseIp } from '../ip/ip.js';
import type { Lease, LeaseAttrs } from '../lease/lease.js';
import { ManualClock, settle } from '../testing/manual-clock.js';
import { MemoryRegistry } from '../testing/memory-registry.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { LocalManager } from './local-manager.js';

const hour = 3_600_000;
const attrs: LeaseAttrs = { publicIp: parseIp('203.0.113.1'), backendType: 'vxlan', backendData: '{"VNI":1,"VtepMAC":"0e:00:00:00:00:01"}' };

async function held(t: { after(fn: () => void): void }, options: { ttlSeconds?: number; marginMs?: number } = {}) {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' });
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const manager = new LocalManager({
    registry,
    log: recordingLogger(),
    clock,
    random: () => 1,
    leaseTtlSeconds: options.ttlSeconds ?? 24 * 3600,
    renewMarginMs: options.marginMs ?? hour,
  });
  const first = await manager.acquireLease(attrs, ctl.signal);
  const yielded: Lease[] = [];
  const updates: number[] = [];
  const holding = (async () => {
    for await (const lease of manager.holdLease(ctl.signal)) yielded.push(lease);
  })().catch(() => undefined);
  t.after(() => holding);
  await settle();
  const countUpdates = (): number => registry.calls.filter((c) => c === 'updateLease').length;
  return { clock, registry, manager, first, yielded, updates, countUpdates };
}

test('a lease is renewed the margin before it expires, not at expiry, and the renewal carries the new expiry', async (t) => {
  const { clock, first, yielded, countUpdates } = await held(t);
  assert.equal(first.expiresAt, clock.now() + 24 * hour, 'the acquired lease carries its expiry');
  const acquiredAt = clock.now();
  await clock.advance(23 * hour - 1000);
  assert.equal(countUpdates(), 0, 'not renewed yet');
  await clock.advance(2000);
  assert.equal(countUpdates(), 1, 'renewed one hour before expiry');
  assert.equal(yielded.length, 1);
  assert.equal(yielded[0]!.expiresAt, acquiredAt + 23 * hour + 24 * hour, 'the renewed lease carries its new expiry');
  await clock.advance(23 * hour);
  assert.equal(countUpdates(), 2, 'and again one hour before the next expiry');
});

test('a failing renewal backs off (1 s, 2 s, 4 s with equal jitter at its top); after a success the backoff starts over', async (t) => {
  const { clock, registry, countUpdates } = await held(t);
  const times: number[] = [];
  const record = async (until: () => boolean): Promise<void> => {
    for (let i = 0; i < 100 && !until(); i++) {
      const before = countUpdates();
      await clock.advance(500);
      if (countUpdates() > before) times.push(clock.now());
    }
  };
  await clock.advance(23 * hour - 500);
  registry.failNext('updateLease', ErrorCodes.UNAVAILABLE, 3);
  await record(() => countUpdates() >= 4);
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  assert.deepEqual(gaps, [1000, 2000, 4000], 'three failures, then the fourth attempt lands');
  times.length = 0;
  await clock.advance(23 * hour - 8000);
  registry.failNext('updateLease', ErrorCodes.UNAVAILABLE, 1);
  await record(() => countUpdates() >= 6);
  assert.deepEqual(times.slice(1).map((t, i) => t - times[i]!), [1000], 'the backoff started over after the success');
});

test('a lease deleted behind the manager\'s back is taken back on the same subnet and yielded', async (t) => {
  const { registry, first, yielded } = await held(t);
  registry.remove(first.subnet);
  await settle();
  await settle();
  assert.equal(registry.leases().length, 1);
  assert.deepEqual(registry.leases()[0]!.subnet, first.subnet);
  assert.equal(yielded.length, 1);
  assert.deepEqual(yielded[0]!.subnet, first.subnet);
});

test('a lease whose renewals all fail expires on the clock, and the manager takes it back on its subnet', async (t) => {
  const { clock, registry, first, yielded } = await held(t, { ttlSeconds: 60, marginMs: 10_000 });
  registry.failNext('updateLease', ErrorCodes.UNAVAILABLE, 1000);
  await clock.advance(59_000);
  assert.equal(registry.calls.filter((c) => c === 'createLease').length, 1, 'still the first lease');
  await clock.advance(2000);
  assert.equal(registry.calls.filter((c) => c === 'createLease').length, 2, 'the TTL ran out and the lease was created again');
  assert.deepEqual(registry.leases().map((l) => l.subnet), [first.subnet]);
  assert.deepEqual(yielded.at(-1)?.subnet, first.subnet);
});
