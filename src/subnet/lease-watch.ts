/**
 * A lease watch that never misses an event (spec §2.7, §12.4-6):
 * 1. list, and report the difference to what was known (the first time: everything);
 * 2. watch from exactly the listing's revision + 1, reporting each change in order;
 * 3. on compaction or a broken stream, back off (100 ms doubling to 30 s) and go to 1. Re-listing
 *    after any break, not only compaction, also covers an etcd whose data was wiped: its
 *    revisions restart, and resuming from an old revision would wait for changes that never come.
 * A bad entry is skipped by the registry, never turned into "every peer removed". An outage is
 * logged twice, when it begins and when the registry answers again, not at every retry.
 */
import { publish } from '../core/events.js';
import { Backoff, type BackoffOptions } from '../core/backoff.js';
import { type Clock, systemClock } from '../core/clock.js';
import { ErrorCodes, isWeftError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { LeaseTracker, type TrackedEvent } from '../lease/lease-tracker.js';
import type { Lease, SubnetPair } from '../lease/lease.js';
import type { LeaseSnapshot, Registry, RegistryBatch, StoredLease, Unguarded } from './registry.js';

export interface LeaseWatchOptions {
  readonly registry: Registry;
  readonly log: Logger;
  /** Watch this one subnet's key instead of all leases. */
  readonly subnet?: SubnetPair;
  readonly backoff?: BackoffOptions;
  readonly clock?: Clock;
  readonly signal: AbortSignal;
}

export type LeaseWatchEvent = TrackedEvent<StoredLease>;

/**
 * Yields batches of events: first the initial snapshot (possibly empty), then every change.
 * Returns when `signal` aborts; registry failures are retried, never thrown. Unguarded (`guards:
 * false`), the leases come without what only a write needs (registry.ts).
 */
export function watchLeaseSet(options: LeaseWatchOptions & Unguarded): AsyncGenerator<Array<TrackedEvent<Lease>>>;
export function watchLeaseSet(options: LeaseWatchOptions): AsyncGenerator<LeaseWatchEvent[]>;
export async function* watchLeaseSet(options: LeaseWatchOptions & { guards?: false }): AsyncGenerator<Array<TrackedEvent<Lease>>> {
  const { registry, log, signal } = options;
  // One body for both overloads: the guarded one's StoredLease holds because both reads below are
  // guarded unless the options say otherwise.
  const tracker = new LeaseTracker<Lease>();
  const only = options.subnet ? { subnet: options.subnet } : {};
  const list = (): Promise<LeaseSnapshot<Lease>> => (options.guards === false ? registry.getLeases({ ...only, guards: false, signal }) : registry.getLeases({ ...only, signal }));
  const watch = (fromRevision: number): AsyncIterable<RegistryBatch<Lease>> =>
    options.guards === false ? registry.watchLeases({ fromRevision, ...only, guards: false, signal }) : registry.watchLeases({ fromRevision, ...only, signal });
  const backoff = new Backoff({ maxMs: 30_000, ...options.backoff });
  let first = true;
  /** Failed attempts in a row; the first is logged, the rest only counted. */
  let failures = 0;
  while (!signal.aborted) {
    try {
      // The listing and its events are let go once handed on: a suspended generator keeps its
      // locals alive, and this one stays suspended for as long as the watch is quiet.
      let snap: LeaseSnapshot<Lease> | undefined = await list();
      if (failures > 0) log.info({ failures }, 'lease watch is back: the registry answered the listing');
      failures = 0;
      let revision = snap.revision;
      let events: Array<TrackedEvent<Lease>> | undefined = tracker.reset(snap.leases);
      snap = undefined;
      if (first || events.length > 0) yield events;
      events = undefined;
      first = false;
      for await (const batch of watch(revision + 1)) {
        revision = batch.revision;
        backoff.reset();
        const out: Array<TrackedEvent<Lease>> = [];
        for (const ev of batch.events) {
          const e = ev.type === 'delete' ? tracker.remove(ev.subnet) : tracker.put(ev.lease);
          if (e) out.push(e);
        }
        if (out.length > 0) yield out;
      }
    } catch (err) {
      if (signal.aborted) return;
      const wait = backoff.next();
      publish('watch.restart', { reason: isWeftError(err, ErrorCodes.COMPACTED) ? 'compacted' : 'broken' });
      if (isWeftError(err, ErrorCodes.COMPACTED)) {
        log.info({ err, retryMs: wait }, 'lease watch fell behind a compaction; listing again');
      } else if (failures === 0) {
        log.warn({ err, retryMs: wait }, 'lease watch broke; listing again, with a growing pause, until the registry answers');
      } else {
        log.debug({ err, retryMs: wait, failures }, 'lease watch still broken');
      }
      failures++;
      try {
        await (options.clock ?? systemClock).sleep(wait, signal);
      } catch {
        return;
      }
    }
  }
}
