/**
 * The set of known leases, keyed by subnet, turning snapshots and single changes into
 * added/removed events (flannel's LeaseWatcher.Reset/Update, spec §2.7). Pure.
 *
 * Differences from flannel, on purpose: a lease whose attributes changed is reported as added
 * again (flannel's snapshot diff stays silent), and a removal of an unknown subnet yields nothing.
 */
import { formatSubnetKey } from './subnet-key.js';
import { type Lease, type SubnetPair, leaseAttrsEqual } from './lease.js';

/** A change, with its subnet key (LeaseEvent's `key`): for a lease new to the tracker, the very string the tracker keeps. */
export type TrackedEvent<L extends Lease> = { readonly type: 'added' | 'removed'; readonly lease: L; readonly key: string };

export class LeaseTracker<L extends Lease = Lease> {
  readonly #known = new Map<string, L>();

  get size(): number {
    return this.#known.size;
  }


  get(subnet: SubnetPair): L | undefined {
    return this.#known.get(formatSubnetKey(subnet));
  }

  /**
   * Replaces the whole set; events say what differs (removals first). A key still known keeps the
   * string it was first set with (Map.set on a known key keeps its key), which whoever took it
   * from the event that added the lease holds too: a re-listing adds no third copy.
   */
  reset(leases: Iterable<L>): Array<TrackedEvent<L>> {
    const next = new Map<string, L>();
    for (const lease of leases) next.set(formatSubnetKey(lease.subnet), lease);
    const events: Array<TrackedEvent<L>> = [];
    for (const [key, old] of this.#known) {
      if (next.has(key)) continue;
      events.push({ type: 'removed', lease: old, key });
      this.#known.delete(key);
    }
    for (const [key, lease] of next) {
      const old = this.#known.get(key);
      if (!old || !leaseAttrsEqual(old.attrs, lease.attrs)) events.push({ type: 'added', lease, key });
      this.#known.set(key, lease);
    }
    return events;
  }

  /** Records a written lease; an event unless it is already known with the same attributes. */
  put(lease: L): TrackedEvent<L> | undefined {
    const key = formatSubnetKey(lease.subnet);
    const old = this.#known.get(key);
    this.#known.set(key, lease);
    return old && leaseAttrsEqual(old.attrs, lease.attrs) ? undefined : { type: 'added', lease, key };
  }

  /** Forgets a subnet; the event carries the last attributes seen, so entries can be undone. */
  remove(subnet: SubnetPair): TrackedEvent<L> | undefined {
    const key = formatSubnetKey(subnet);
    const old = this.#known.get(key);
    if (!old) return undefined;
    this.#known.delete(key);
    return { type: 'removed', lease: old, key };
  }
}
