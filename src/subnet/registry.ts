/**
 * The storage port under the subnet manager: flannel's Registry, revision-aware. Implementations
 * decode what they store and skip what does not decode, so callers only ever see valid leases.
 */
import type { Lease, LeaseAttrs, SubnetPair } from '../lease/lease.js';

/** A lease as stored, with what is needed to update it safely. */
export interface StoredLease extends Lease {
  /** Revision of the last write to the key; guarded updates compare against it. */
  readonly modRevision: number;
  /** The registry's lease (TTL) ID; `'0'` for a reservation, which never expires. */
  readonly ttlLease: string;
  /** When the TTL lease runs out, in ms since the epoch, if this process granted it. */
  readonly expiresAt?: number;
}

export interface LeaseSnapshot<L extends Lease = StoredLease> {
  readonly leases: readonly L[];
  /** The registry revision the snapshot was read at: watch from `revision + 1`. */
  readonly revision: number;
}

export type RegistryEvent<L extends Lease = StoredLease> =
  | { readonly type: 'put'; readonly lease: L }
  | { readonly type: 'delete'; readonly subnet: SubnetPair };

export interface RegistryBatch<L extends Lease = StoredLease> {
  readonly revision: number;
  readonly events: ReadonlyArray<RegistryEvent<L>>;
}

/**
 * Asks a read for leases without their write guards (`modRevision`, `ttlLease`): the peers'
 * watch, which never writes a peer's lease, keeps each for the peer's life, and an etcd lease ID
 * is a string of up to 20 digits (56 bytes a peer with the guards' two members, docs/benchmarks.md).
 * The unguarded overloads come first, so that options that may hold `guards: false` are never
 * typed as guarded leases.
 */
export interface Unguarded {
  readonly guards: false;
}

export interface WriteOptions {
  /** TTL of the new lease in seconds; 0 writes a reservation (no TTL). */
  readonly ttlSeconds: number;
  readonly signal: AbortSignal;
}

export interface Registry {
  /** The raw network config text. Throws WEFT_ERR_CONFIG_NOT_FOUND when there is none. */
  getNetworkConfig(signal: AbortSignal): Promise<string>;

  /** Every valid lease, or with `subnet` only that one (if present), at one revision. */
  getLeases(options: { subnet?: SubnetPair; signal: AbortSignal } & Unguarded): Promise<LeaseSnapshot<Lease>>;
  getLeases(options: { subnet?: SubnetPair; signal: AbortSignal }): Promise<LeaseSnapshot>;

  /** Creates the lease only if its key does not exist; WEFT_ERR_SUBNET_TAKEN otherwise. */
  createLease(subnet: SubnetPair, attrs: LeaseAttrs, options: WriteOptions): Promise<StoredLease>;

  /**
   * Rewrites `current` with `attrs` and a fresh TTL, only if nobody wrote the key since
   * `current.modRevision`; WEFT_ERR_LEASE_CHANGED otherwise. Releases the old TTL lease.
   */
  updateLease(current: StoredLease, attrs: LeaseAttrs, options: WriteOptions): Promise<StoredLease>;

  /** Deletes `current` if unchanged since it was read; false when it had changed or vanished. */
  deleteLease(current: StoredLease, signal: AbortSignal): Promise<boolean>;

  /**
   * Changes from `fromRevision` on, in order, every revision exactly once. Throws
   * WEFT_ERR_COMPACTED when `fromRevision` is gone and WEFT_ERR_UNAVAILABLE when the stream
   * breaks; it never ends otherwise until `signal` aborts.
   */
  watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal } & Unguarded): AsyncIterable<RegistryBatch<Lease>>;
  watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal }): AsyncIterable<RegistryBatch>;

  /**
   * While watches are open, when the registry last proved that they are alive (data, an answered
   * keepalive); otherwise when it last answered (ms since the epoch; 0: never). Lets the health
   * check trust an open watch instead of reading the lease again.
   */
  lastAlive(): number;
}
