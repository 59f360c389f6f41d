/**
 * An in-memory Registry for unit tests of lease policy: etcd's semantics as the subnet manager
 * relies on them (revisions, guarded writes, TTL leases that expire on the injected clock, a watch
 * that replays from a revision, compaction), plus the faults a test needs: another writer, a
 * compaction, a broken watch, a failing request. Real etcd stays for the end-to-end tests.
 */
import { AsyncQueue } from '../core/async-queue.js';
import type { Clock } from '../core/clock.js';
import { ErrorCodes, WeftError, type WeftErrorCode } from '../core/errors.js';
import { type Lease, type LeaseAttrs, type SubnetPair, subnetPairEquals } from '../lease/lease.js';
import { formatSubnetKey } from '../lease/subnet-key.js';
import type { LeaseSnapshot, Registry, RegistryBatch, RegistryEvent, StoredLease, Unguarded, WriteOptions } from '../subnet/registry.js';

type Method = 'getNetworkConfig' | 'getLeases' | 'createLease' | 'updateLease' | 'deleteLease' | 'watchLeases';

interface Entry {
  readonly lease: StoredLease;
  /** Cancels the TTL lease's expiry when the key is rewritten or deleted. */
  readonly expiry?: AbortController;
}

interface Watcher {
  readonly subnet?: SubnetPair;
  readonly queue: AsyncQueue<RegistryBatch | WeftError>;
}

export class MemoryRegistry implements Registry {
  readonly #clock: Clock;
  /** `<prefix>/config`; undefined: absent. */
  config: string | undefined;
  #revision = 1;
  #compacted = 0;
  #ttlIds = 0;
  readonly #entries = new Map<string, Entry>();
  readonly #history: Array<{ revision: number; event: RegistryEvent }> = [];
  readonly #watchers = new Set<Watcher>();
  readonly #failing = new Map<Method, { code: WeftErrorCode; times: number }>();
  /** Every call, by method, in order: what a test asserts about the manager's requests. */
  readonly calls: Method[] = [];

  constructor(options: { clock: Clock; config?: string }) {
    this.#clock = options.clock;
    this.config = options.config;
  }

  get revision(): number {
    return this.#revision;
  }

  /** The stored leases, in key order. */
  leases(): StoredLease[] {
    return [...this.#entries.keys()].sort().map((k) => this.#entries.get(k)!.lease);
  }

  /** What lastAlive() answers; a test sets it to say when the watches last proved alive. */
  aliveAt = 0;

  lastAlive(): number {
    return this.aliveAt;
  }

  /** The next `times` calls of `method` fail with `code`. */
  failNext(method: Method, code: WeftErrorCode, times = 1): void {
    this.#failing.set(method, { code, times });
  }

  async getNetworkConfig(): Promise<string> {
    this.#call('getNetworkConfig');
    if (this.config === undefined) throw new WeftError(ErrorCodes.CONFIG_NOT_FOUND, 'no config');
    return this.config;
  }

  getLeases(options: { subnet?: SubnetPair; signal: AbortSignal } & Unguarded): Promise<LeaseSnapshot<Lease>>;
  getLeases(options: { subnet?: SubnetPair; signal: AbortSignal }): Promise<LeaseSnapshot>;
  async getLeases(options: { subnet?: SubnetPair; signal: AbortSignal; guards?: false }): Promise<LeaseSnapshot<Lease>> {
    this.#call('getLeases');
    const leases = this.leases().filter((l) => !options.subnet || subnetPairEquals(l.subnet, options.subnet));
    return { leases: options.guards === false ? leases.map(unguarded) : leases, revision: this.#revision };
  }

  async createLease(subnet: SubnetPair, attrs: LeaseAttrs, options: WriteOptions): Promise<StoredLease> {
    this.#call('createLease');
    if (this.#entries.has(formatSubnetKey(subnet))) throw new WeftError(ErrorCodes.SUBNET_TAKEN, `subnet already exists: ${formatSubnetKey(subnet)}`);
    return this.#put(subnet, attrs, options.ttlSeconds);
  }

  async updateLease(current: StoredLease, attrs: LeaseAttrs, options: WriteOptions): Promise<StoredLease> {
    this.#call('updateLease');
    const entry = this.#entries.get(formatSubnetKey(current.subnet));
    if (!entry || entry.lease.modRevision !== current.modRevision) throw new WeftError(ErrorCodes.LEASE_CHANGED, `${formatSubnetKey(current.subnet)} changed since revision ${current.modRevision}`);
    return this.#put(current.subnet, attrs, options.ttlSeconds);
  }

  async deleteLease(current: StoredLease): Promise<boolean> {
    this.#call('deleteLease');
    const entry = this.#entries.get(formatSubnetKey(current.subnet));
    if (!entry || entry.lease.modRevision !== current.modRevision) return false;
    this.remove(current.subnet);
    return true;
  }

  watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal } & Unguarded): AsyncGenerator<RegistryBatch<Lease>>;
  watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal }): AsyncGenerator<RegistryBatch>;
  async *watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal; guards?: false }): AsyncGenerator<RegistryBatch<Lease>> {
    this.#call('watchLeases');
    if (options.fromRevision <= this.#compacted) throw new WeftError(ErrorCodes.COMPACTED, `revision ${options.fromRevision} is compacted`);
    const watcher: Watcher = { ...(options.subnet ? { subnet: options.subnet } : {}), queue: new AsyncQueue() };
    for (const h of this.#history) {
      if (h.revision >= options.fromRevision && matches(watcher, h.event)) watcher.queue.push({ revision: h.revision, events: [h.event] });
    }
    this.#watchers.add(watcher);
    try {
      for (;;) {
        let item: RegistryBatch | WeftError;
        try {
          item = await watcher.queue.next(options.signal);
        } catch (err) {
          if (options.signal.aborted) return;
          throw err;
        }
        if (item instanceof WeftError) throw item;
        yield options.guards === false ? { revision: item.revision, events: item.events.map((e) => (e.type === 'put' ? { type: 'put', lease: unguarded(e.lease) } : e)) } : item;
      }
    } finally {
      this.#watchers.delete(watcher);
    }
  }

  /** Another writer's put (an operator, another agent): no TTL unless given. */
  write(subnet: SubnetPair, attrs: LeaseAttrs, ttlSeconds = 0): StoredLease {
    return this.#put(subnet, attrs, ttlSeconds);
  }

  /** Another writer's delete (or an expiry). */
  remove(subnet: SubnetPair): void {
    const key = formatSubnetKey(subnet);
    const entry = this.#entries.get(key);
    if (!entry) return;
    entry.expiry?.abort();
    this.#entries.delete(key);
    this.#record({ type: 'delete', subnet: entry.lease.subnet });
  }

  /** Forgets the history up to now: a watch from an older revision fails with WEFT_ERR_COMPACTED. */
  compact(): void {
    this.#compacted = this.#revision;
    this.#history.length = 0;
  }

  /** Every open watch breaks, as a connection to etcd that drops. */
  breakWatches(): void {
    for (const w of this.#watchers) w.queue.push(new WeftError(ErrorCodes.UNAVAILABLE, 'the watch stream broke'));
  }

  #put(subnet: SubnetPair, attrs: LeaseAttrs, ttlSeconds: number): StoredLease {
    const key = formatSubnetKey(subnet);
    this.#entries.get(key)?.expiry?.abort();
    const revision = ++this.#revision;
    const ttlLease = ttlSeconds > 0 ? String(++this.#ttlIds) : '0';
    // As etcd: the create revision stays with the key until it is deleted.
    const created = this.#entries.get(key)?.lease.created ?? revision;
    const lease: StoredLease = { subnet, attrs, modRevision: revision, created, ttlLease, ...(ttlSeconds > 0 ? { expiresAt: this.#clock.now() + ttlSeconds * 1000 } : {}) };
    let expiry: AbortController | undefined;
    if (ttlSeconds > 0) {
      expiry = new AbortController();
      this.#clock.sleep(ttlSeconds * 1000, expiry.signal).then(
        () => {
          if (this.#entries.get(key)?.lease === lease) this.remove(subnet);
        },
        () => undefined,
      );
    }
    this.#entries.set(key, { lease, ...(expiry ? { expiry } : {}) });
    this.#history.push({ revision, event: { type: 'put', lease } });
    this.#notify(revision, { type: 'put', lease });
    return lease;
  }

  #record(event: RegistryEvent): void {
    const revision = ++this.#revision;
    this.#history.push({ revision, event });
    this.#notify(revision, event);
  }

  #notify(revision: number, event: RegistryEvent): void {
    for (const w of this.#watchers) if (matches(w, event)) w.queue.push({ revision, events: [event] });
  }

  #call(method: Method): void {
    this.calls.push(method);
    const failing = this.#failing.get(method);
    if (!failing || failing.times <= 0) return;
    failing.times--;
    throw new WeftError(failing.code, `${method} failed (test)`);
  }
}

function matches(w: Watcher, event: RegistryEvent): boolean {
  const subnet = event.type === 'put' ? event.lease.subnet : event.subnet;
  return !w.subnet || subnetPairEquals(w.subnet, subnet);
}

/** A lease as an unguarded read gives it, as the etcd registry does: no write guards, no expiry. */
function unguarded(l: StoredLease): Lease {
  return l.created !== undefined ? { subnet: l.subnet, attrs: l.attrs, created: l.created } : { subnet: l.subnet, attrs: l.attrs };
}
