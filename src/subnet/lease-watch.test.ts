/**
 * The lease watch over an in-memory registry on a manual clock: the first batch, changes in order,
 * and a relist with the difference after a broken stream or a compaction, retried with backoff.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe } from '../core/events.js';
import { ErrorCodes } from '../core/errors.js';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import type { LeaseAttrs, SubnetPair } from '../lease/lease.js';
import { ManualClock, settle } from '../testing/manual-clock.js';
import { MemoryRegistry } from '../testing/memory-registry.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { type LeaseWatchEvent, watchLeaseSet } from './lease-watch.js';

const subnet = (n: number): SubnetPair => ({ ipv4: parseCidr(`198.18.${n}.0/24`) });
const attrs = (n: number, mac = n): LeaseAttrs => ({ publicIp: parseIp(`203.0.113.${n}`), backendType: 'vxlan', backendData: `{"VNI":1,"VtepMAC":"0e:00:00:00:00:${mac.toString(16).padStart(2, '0')}"}` });
const describe = (e: LeaseWatchEvent): string => `${e.type} ${e.lease.subnet.ipv4!.ip.value >> 8n & 0xffn}`;

function watch(t: { after(fn: () => void): void }, registry: MemoryRegistry, clock: ManualClock, options: { subnet?: SubnetPair } = {}) {
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const batches: string[][] = [];
  const log = recordingLogger();
  const done = (async () => {
    for await (const batch of watchLeaseSet({ registry, log, clock, backoff: { initialMs: 100, maxMs: 1000, random: () => 1 }, signal: ctl.signal, ...options })) batches.push(batch.map(describe));
  })();
  return { batches, log, done, ctl };
}

test('the first batch is every lease (or none at all), then each change once, in order; an unchanged rewrite is no change', async (t) => {
  const clock = new ManualClock();
  const empty = new MemoryRegistry({ clock });
  const none = watch(t, empty, clock);
  await settle();
  assert.deepEqual(none.batches, [[]], 'an empty first batch still comes: the backend is then in sync');
  const registry = new MemoryRegistry({ clock });
  registry.write(subnet(1), attrs(1));
  registry.write(subnet(2), attrs(2));
  const w = watch(t, registry, clock);
  await settle();
  registry.write(subnet(3), attrs(3));
  registry.write(subnet(2), attrs(2));
  registry.write(subnet(2), attrs(2, 0x22));
  registry.remove(subnet(1));
  registry.remove(subnet(9));
  await settle();
  assert.deepEqual(w.batches, [['added 1', 'added 2'], ['added 3'], ['added 2'], ['removed 1']]);
});

test('a broken stream and a compaction each lead to a relist whose difference is reported, after a backoff that grows, and starts over once a batch gets through the watch', async (t) => {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock });
  registry.write(subnet(1), attrs(1));
  registry.write(subnet(2), attrs(2));
  const restarts: string[] = [];
  t.after(subscribe('watch.restart', (m) => restarts.push(m.reason)));
  const w = watch(t, registry, clock);
  await settle();
  // A watch that breaks while the registry changes: the changes arrive through the relist.
  registry.breakWatches();
  await settle();
  registry.remove(subnet(1));
  registry.write(subnet(4), attrs(4));
  await clock.advance(99);
  assert.equal(w.batches.length, 1, 'it waits the backoff before listing again');
  await clock.advance(1);
  assert.deepEqual(w.batches.slice(1), [['removed 1', 'added 4']]);
  // A batch through the watch: the backoff starts over.
  registry.write(subnet(7), attrs(7));
  await settle();
  assert.deepEqual(w.batches.slice(2), [['added 7']]);
  // A compaction past the watch's revision while it is broken: a relist after the first step.
  registry.breakWatches();
  registry.write(subnet(5), attrs(5));
  registry.compact();
  await clock.advance(100);
  assert.deepEqual(w.batches.slice(3), [['added 5']]);
  // Broken again before any batch got through the watch: the pause grows.
  registry.breakWatches();
  registry.write(subnet(6), attrs(6));
  await clock.advance(100);
  assert.equal(w.batches.length, 4);
  await clock.advance(100);
  assert.deepEqual(w.batches.slice(4), [['added 6']]);
  assert.deepEqual(restarts, ['broken', 'broken', 'broken']);
});

test('a watch from a compacted revision is told apart, and a registry that keeps failing is retried with a growing pause', async (t) => {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock });
  registry.write(subnet(1), attrs(1));
  const restarts: string[] = [];
  t.after(subscribe('watch.restart', (m) => restarts.push(m.reason)));
  registry.failNext('getLeases', ErrorCodes.UNAVAILABLE, 3);
  const w = watch(t, registry, clock);
  await settle();
  assert.deepEqual(w.batches, []);
  const lists = (): number => registry.calls.filter((c) => c === 'getLeases').length;
  await clock.advance(100);
  assert.equal(lists(), 2);
  await clock.advance(199);
  assert.equal(lists(), 2, 'the second pause is longer');
  await clock.advance(1);
  await clock.advance(400);
  assert.equal(lists(), 4);
  assert.deepEqual(w.batches, [['added 1']]);
  assert.deepEqual(restarts, ['broken', 'broken', 'broken']);
  const said = w.log.lines.filter((l) => l.level !== 'debug').map((l) => l.msg);
  assert.deepEqual(said, ['lease watch broke; listing again, with a growing pause, until the registry answers', 'lease watch is back: the registry answered the listing'], 'an outage is two lines, however long');
  // The registry compacts between the list and the watch: told apart by its reason.
  restarts.length = 0;
  registry.failNext('watchLeases', ErrorCodes.COMPACTED, 1);
  registry.breakWatches();
  await clock.wakeNext();
  await clock.wakeNext();
  assert.deepEqual(restarts, ['broken', 'compacted']);
  assert.ok(w.log.lines.some((l) => l.msg === 'lease watch fell behind a compaction; listing again'));
});

test('a relist that finds nothing changed yields no batch; a stop during a registry failure or a pause ends quietly, reporting no restart', async (t) => {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock });
  registry.write(subnet(1), attrs(1));
  const restarts: string[] = [];
  t.after(subscribe('watch.restart', (m) => restarts.push(m.reason)));
  const w = watch(t, registry, clock);
  await settle();
  registry.breakWatches();
  await clock.advance(100);
  assert.deepEqual(w.batches, [['added 1']], 'nothing changed: no empty batch');
  assert.deepEqual(restarts, ['broken']);
  // Stopped while waiting out a pause: the generator ends, nothing more is reported.
  registry.breakWatches();
  await settle();
  w.ctl.abort();
  await w.done;
  assert.deepEqual(restarts, ['broken', 'broken']);
  // Stopped while a request is in flight: its failure is the stop, not a registry failure.
  const held = new MemoryRegistry({ clock });
  const ctl = new AbortController();
  const inFlight: typeof held = Object.assign(Object.create(held) as MemoryRegistry, {
    getLeases: (options: { signal: AbortSignal }) => new Promise<never>((_, reject) => options.signal.addEventListener('abort', () => reject(options.signal.reason), { once: true })),
  });
  const ended = (async () => {
    const batches = watchLeaseSet({ registry: inFlight, log: recordingLogger(), clock, signal: ctl.signal });
    assert.equal((await batches.next()).done, true, 'no batch: it ends');
  })();
  await settle();
  ctl.abort();
  await ended;
  assert.deepEqual(restarts, ['broken', 'broken'], 'no restart reported for a stop');
});

test('a watch of one subnet sees that subnet only', async (t) => {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock });
  registry.write(subnet(1), attrs(1));
  registry.write(subnet(2), attrs(2));
  const w = watch(t, registry, clock, { subnet: subnet(2) });
  await settle();
  registry.write(subnet(1), attrs(1, 0x11));
  registry.remove(subnet(2));
  await settle();
  assert.deepEqual(w.batches, [['added 2'], ['removed 2']]);
});

test('unguarded, every lease comes without the write guards, from the listing and from the watch; guarded, with them', async (t) => {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock });
  registry.write(subnet(1), attrs(1), 600);
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const members: string[][] = [];
  const guarded: string[][] = [];
  void (async () => {
    for await (const batch of watchLeaseSet({ registry, log: recordingLogger(), clock, signal: ctl.signal, guards: false })) for (const e of batch) members.push(Object.keys(e.lease).sort());
  })();
  void (async () => {
    for await (const batch of watchLeaseSet({ registry, log: recordingLogger(), clock, signal: ctl.signal })) for (const e of batch) guarded.push(Object.keys(e.lease).sort());
  })();
  await settle();
  registry.write(subnet(2), attrs(2), 600);
  await settle();
  assert.deepEqual(members, [['attrs', 'created', 'subnet'], ['attrs', 'created', 'subnet']], 'the listing\'s lease and the watched one');
  assert.deepEqual(guarded, [['attrs', 'created', 'expiresAt', 'modRevision', 'subnet', 'ttlLease'], ['attrs', 'created', 'expiresAt', 'modRevision', 'subnet', 'ttlLease']]);
});
