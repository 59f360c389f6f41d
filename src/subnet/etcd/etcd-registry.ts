/**
 * flannel's etcd v3 layout (spec §2): `<prefix>/config`, and `<prefix>/subnets/<subnet-key>`
 * holding lease JSON attached to an etcd lease. Entries are untrusted: a key that is not a subnet
 * key or a value that does not decode is skipped with one warning per written version.
 */
import { type Clock, systemClock } from '../../core/clock.js';
import { Backoff } from '../../core/backoff.js';
import { ErrorCodes, WeftError, isWeftError } from '../../core/errors.js';
import { type Logger, silentLogger } from '../../core/log.js';
import { decodeLeaseAttrs, encodeLeaseAttrs } from '../../lease/lease-codec.js';
import type { Lease, LeaseAttrs, SubnetPair } from '../../lease/lease.js';
import { formatSubnetKey, parseSubnetKey } from '../../lease/subnet-key.js';
import type { LeaseSnapshot, Registry, RegistryBatch, RegistryEvent, StoredLease, Unguarded, WriteOptions } from '../registry.js';
import type { EtcdClient, KeyValue } from './etcd-client.js';

export const defaultEtcdPrefix = '/coreos.com/network';

export interface EtcdRegistryOptions {
  readonly prefix?: string;
  readonly log?: Logger;
  /** Clock for lease expiry bookkeeping; the system's by default. */
  readonly clock?: Clock;
}

/** Joins path segments as Go's path.Join does: duplicate and trailing slashes collapse. */
export function joinKey(...parts: string[]): string {
  const joined = parts.join('/').replace(/\/+/g, '/');
  return joined.length > 1 ? joined.replace(/\/$/, '') : joined;
}

/** A registry entry that no agent programs, as `weft status` shows it. */
export interface SkippedEntry {
  readonly key: string;
  readonly reason: string;
  /** When it was first found invalid (ms since the epoch). */
  readonly since: number;
}

export class EtcdRegistry implements Registry {
  readonly #etcd: EtcdClient;
  readonly #configKey: string;
  readonly #subnetsDir: string;
  readonly #log: Logger;
  readonly #clock: Clock;
  /** Entries skipped as invalid: the revision warned about (one bad entry logs once), why, since when. */
  readonly #warned = new Map<string, SkippedEntry & { modRevision: number }>();

  constructor(etcd: EtcdClient, options: EtcdRegistryOptions = {}) {
    const prefix = options.prefix ?? defaultEtcdPrefix;
    this.#etcd = etcd;
    this.#configKey = joinKey(prefix, 'config');
    this.#subnetsDir = joinKey(prefix, 'subnets') + '/';
    this.#log = options.log ?? silentLogger;
    this.#clock = options.clock ?? systemClock;
  }

  subnetKey(subnet: SubnetPair): string {
    return this.#subnetsDir + formatSubnetKey(subnet);
  }

  async getNetworkConfig(signal: AbortSignal): Promise<string> {
    const res = await this.#etcd.range(this.#configKey, { signal });
    const kv = res.kvs[0];
    if (!kv) {
      throw new WeftError(
        ErrorCodes.CONFIG_NOT_FOUND,
        `flannel config not found in etcd store at ${this.#configKey}. Did you create your config using etcdv3 API?`,
      );
    }
    return kv.value;
  }

  /**
   * The config's text now and after every change (undefined once it is deleted), until `signal`
   * aborts; a broken or compacted watch reads it again, after a pause that grows to 30 s.
   */
  async *watchNetworkConfig(signal: AbortSignal): AsyncGenerator<string | undefined> {
    const backoff = new Backoff({ maxMs: 30_000 });
    while (!signal.aborted) {
      try {
        const res = await this.#etcd.range(this.#configKey, { signal });
        yield res.kvs[0]?.value;
        for await (const batch of this.#etcd.watch(this.#configKey, { startRevision: res.revision + 1, signal })) {
          backoff.reset();
          for (const ev of batch.events) yield ev.type === 'DELETE' ? undefined : ev.kv.value;
        }
      } catch (err) {
        if (signal.aborted) return;
        this.#log.debug({ err }, 'the watch of the network config broke; reading it again');
      }
      await this.#clock.sleep(backoff.next(), signal).catch(() => undefined);
    }
  }

  getLeases(options: { subnet?: SubnetPair; signal: AbortSignal } & Unguarded): Promise<LeaseSnapshot<Lease>>;
  getLeases(options: { subnet?: SubnetPair; signal: AbortSignal }): Promise<LeaseSnapshot>;
  async getLeases(options: { subnet?: SubnetPair; signal: AbortSignal; guards?: false }): Promise<LeaseSnapshot<Lease>> {
    const guards = options.guards !== false;
    const pages = options.subnet
      ? this.#etcd.rangePages(this.subnetKey(options.subnet), { signal: options.signal })
      : this.#etcd.rangePages(this.#subnetsDir, { prefix: true, signal: options.signal });
    const leases: Lease[] = [];
    // A full listing says which skipped entries are gone (deleted while no watch ran).
    const gone = options.subnet ? undefined : new Set(this.#warned.keys());
    let revision = 0;
    // Decoded page by page: the key-values of 5000 leases (1.7 MB) are not all held at once, and
    // die young rather than in the old generation, where two listings' stacked up (the start's peak).
    for await (const page of pages) {
      revision = page.revision;
      for (const kv of page.kvs) {
        gone?.delete(kv.key);
        const lease = this.#decode(kv, guards);
        if (lease) leases.push(lease);
      }
    }
    for (const key of gone ?? []) this.#warned.delete(key);
    return { leases, revision };
  }

  async createLease(subnet: SubnetPair, attrs: LeaseAttrs, options: WriteOptions): Promise<StoredLease> {
    const key = this.subnetKey(subnet);
    const ttl = await this.#grant(options);
    try {
      const res = await this.#etcd.txn(
        [{ key, target: 'VERSION', version: 0 }],
        [{ put: { key, value: encodeLeaseAttrs(attrs), ...(ttl ? { lease: ttl.id } : {}) } }],
        options.signal,
      );
      if (!res.succeeded) throw new WeftError(ErrorCodes.SUBNET_TAKEN, `subnet already exists: ${key}`);
      return this.#stored(subnet, attrs, res.revision, ttl, res.revision);
    } catch (err) {
      if (ttl) await this.#revokeQuietly(ttl.id);
      throw err;
    }
  }

  async updateLease(current: StoredLease, attrs: LeaseAttrs, options: WriteOptions): Promise<StoredLease> {
    const key = this.subnetKey(current.subnet);
    const ttl = await this.#grant(options);
    let res;
    try {
      res = await this.#etcd.txn(
        [{ key, target: 'MOD', modRevision: current.modRevision }],
        [{ put: { key, value: encodeLeaseAttrs(attrs), ...(ttl ? { lease: ttl.id } : {}) } }],
        options.signal,
      );
      if (!res.succeeded) {
        throw new WeftError(ErrorCodes.LEASE_CHANGED, `${key} changed since revision ${current.modRevision}`);
      }
    } catch (err) {
      if (ttl) await this.#revokeQuietly(ttl.id);
      throw err;
    }
    // The old TTL lease now holds no key; revoking it spares etcd 24 h of bookkeeping.
    if (current.ttlLease !== '0' && current.ttlLease !== ttl?.id) await this.#revokeQuietly(current.ttlLease);
    return this.#stored(current.subnet, attrs, res.revision, ttl, current.created);
  }

  async deleteLease(current: StoredLease, signal: AbortSignal): Promise<boolean> {
    const key = this.subnetKey(current.subnet);
    const res = await this.#etcd.txn([{ key, target: 'MOD', modRevision: current.modRevision }], [{ deleteRange: { key } }], signal);
    return res.succeeded;
  }

  lastAlive(): number {
    return this.#etcd.lastAlive();
  }

  watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal } & Unguarded): AsyncGenerator<RegistryBatch<Lease>>;
  watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal }): AsyncGenerator<RegistryBatch>;
  async *watchLeases(options: { fromRevision: number; subnet?: SubnetPair; signal: AbortSignal; guards?: false }): AsyncGenerator<RegistryBatch<Lease>> {
    const guards = options.guards !== false;
    const stream = options.subnet
      ? this.#etcd.watch(this.subnetKey(options.subnet), { startRevision: options.fromRevision, signal: options.signal })
      : this.#etcd.watch(this.#subnetsDir, { prefix: true, startRevision: options.fromRevision, signal: options.signal });
    for await (const batch of stream) {
      const events: Array<RegistryEvent<Lease>> = [];
      for (const ev of batch.events) {
        if (ev.type === 'DELETE') {
          this.#warned.delete(ev.kv.key);
          const subnet = this.#subnetOf(ev.kv.key);
          if (subnet) events.push({ type: 'delete', subnet });
        } else {
          const lease = this.#decode(ev.kv, guards);
          if (lease) events.push({ type: 'put', lease });
        }
      }
      yield { revision: batch.revision, events };
    }
  }

  async #grant(options: WriteOptions): Promise<{ id: string; ttlSeconds: number } | undefined> {
    return options.ttlSeconds > 0 ? this.#etcd.leaseGrant(options.ttlSeconds, options.signal) : undefined;
  }

  async #revokeQuietly(id: string): Promise<void> {
    try {
      await this.#etcd.leaseRevoke(id, AbortSignal.timeout(5000));
    } catch (err) {
      this.#log.debug({ err, ttlLease: id }, 'could not revoke an unused etcd lease; it will expire on its own');
    }
  }

  #stored(subnet: SubnetPair, attrs: LeaseAttrs, revision: number, ttl: { id: string; ttlSeconds: number } | undefined, created: number | undefined): StoredLease {
    return {
      subnet,
      attrs,
      modRevision: revision,
      ...(created !== undefined ? { created } : {}),
      ttlLease: ttl?.id ?? '0',
      ...(ttl ? { expiresAt: this.#clock.now() + ttl.ttlSeconds * 1000 } : {}),
    };
  }

  #subnetOf(key: string): SubnetPair | undefined {
    return key.startsWith(this.#subnetsDir) ? parseSubnetKey(key.slice(this.#subnetsDir.length)) : undefined;
  }

  #decode(kv: KeyValue, guards: boolean): StoredLease | Lease | undefined {
    const subnet = this.#subnetOf(kv.key);
    if (!subnet) {
      this.#warnOnce(kv, 'skipping a registry entry whose key is not a subnet key');
      return undefined;
    }
    try {
      const attrs = decodeLeaseAttrs(kv.value);
      this.#warned.delete(kv.key);
      if (guards) return { subnet, attrs, modRevision: kv.modRevision, ttlLease: kv.lease, ...(kv.createRevision > 0 ? { created: kv.createRevision } : {}) };
      return kv.createRevision > 0 ? { subnet, attrs, created: kv.createRevision } : { subnet, attrs };
    } catch (err) {
      if (!isWeftError(err, ErrorCodes.LEASE_DECODE)) throw err;
      this.#warnOnce(kv, `skipping lease with an invalid value: ${err.message}`);
      return undefined;
    }
  }

  #warnOnce(kv: KeyValue, msg: string): void {
    const before = this.#warned.get(kv.key);
    if (before?.modRevision === kv.modRevision) return;
    this.#warned.set(kv.key, { key: kv.key, reason: msg, since: before?.since ?? this.#clock.now(), modRevision: kv.modRevision });
    this.#log.warn({ key: kv.key, modRevision: kv.modRevision }, msg);
  }

  /**
   * Entries under `subnets/` that are skipped now, with why and since when: a lease overwritten
   * with an invalid value keeps its last valid form programmed, and `weft status` says so.
   */
  skippedEntries(): SkippedEntry[] {
    return [...this.#warned.values()].map(({ key, reason, since }) => ({ key, reason, since }));
  }
}
