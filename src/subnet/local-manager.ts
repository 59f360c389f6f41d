/**
 * flannel's lease policy over a Registry (spec §4): reuse the lease of this public IP when it
 * still fits the config, else the subnet file's subnet, else a random one of the first 100 free.
 *
 * Beyond flanneld: a lost create race retries with a fresh listing instead of exiting (§12.1);
 * renewal is a guarded rewrite that releases the old TTL lease (§12.2); reservations stay
 * reservations (§12.3); and a lost lease is taken back instead of exiting with status 0 (§4.4).
 */
import { publish } from '../core/events.js';
import { type Clock, systemClock } from '../core/clock.js';
import { Backoff } from '../core/backoff.js';
import { AsyncQueue } from '../core/async-queue.js';
import { Values } from '../core/values.js';
import { ErrorCodes, WeftError, errorMessage, isRetriable, isWeftError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { type NetworkConfig, parseNetworkConfig } from '../config/network-config.js';
import { type IpAddr, formatIp, ipEquals } from '../ip/ip.js';
import { type Lease, type LeaseAttrs, type LeaseEvent, type SubnetPair, formatPublicIps, formatSubnetPair, leaseAttrsEqual, publicIpOf, subnetPairEquals } from '../lease/lease.js';
import { allocateSubnet, blockers, inRange, isCompatible } from './allocator.js';
import { type LeaseWatchEvent, watchLeaseSet } from './lease-watch.js';
import type { Registry, StoredLease } from './registry.js';
import type { LeaseCheck, SubnetManager } from './subnet-manager.js';

export const defaultLeaseTtlSeconds = 24 * 60 * 60;
export const defaultRenewMarginMs = 60 * 60 * 1000;
const maxAcquireAttempts = 10;
/** setTimeout's limit; a longer wait is taken in steps. */
const maxTimerMs = 2 ** 31 - 1;

export interface LocalManagerOptions {
  readonly registry: Registry;
  readonly log: Logger;
  /** The subnets of the subnet file left by a previous run, if any. */
  readonly previous?: SubnetPair;
  readonly leaseTtlSeconds?: number;
  /** Renew this long before expiry (`--subnet-lease-renew-margin`). */
  readonly renewMarginMs?: number;
  readonly random?: () => number;
  readonly clock?: Clock;
  /**
   * Further checks of a config, beyond flannel's (the agent's: its backend and the backend's
   * options); a config that fails them is waited on like a missing one, since it is fixed in etcd.
   */
  readonly checkConfig?: (config: NetworkConfig) => void;
  /**
   * Whether an address is one of this host's. A lease found only by its public IP is adopted
   * when it is (a reinstalled node), refused when it is not and subnet.env does not name it:
   * another node's --public-ip given to this one would otherwise take that node's lease and MAC.
   * Unset: every lease found by public IP is adopted, as flanneld does.
   */
  readonly isLocalAddress?: (ip: IpAddr) => boolean;
}

export class LocalManager implements SubnetManager {
  readonly #registry: Registry;
  readonly #log: Logger;
  readonly #previous: SubnetPair | undefined;
  readonly #ttlSeconds: number;
  readonly #marginMs: number;
  readonly #random: () => number;
  readonly #clock: Clock;
  readonly #checkConfig: (config: NetworkConfig) => void;
  readonly #isLocalAddress: ((ip: IpAddr) => boolean) | undefined;
  #config: NetworkConfig | undefined;
  #configText: string | undefined;
  #attrs: LeaseAttrs | undefined;
  #own: StoredLease | undefined;
  /** holdLease's watch of this node's key has delivered its first listing and runs. */
  #watchingOwn = false;
  /** The own lease is a reservation (written without TTL by an operator): renewals keep it so. */
  #reservation = false;
  /** The own key was written by someone else, so ours must be written back. */
  #needsRewrite = false;

  constructor(options: LocalManagerOptions) {
    this.#registry = options.registry;
    this.#log = options.log;
    this.#previous = options.previous;
    this.#ttlSeconds = options.leaseTtlSeconds ?? defaultLeaseTtlSeconds;
    this.#marginMs = options.renewMarginMs ?? defaultRenewMarginMs;
    this.#random = options.random ?? Math.random;
    this.#clock = options.clock ?? systemClock;
    this.#checkConfig = options.checkConfig ?? (() => undefined);
    this.#isLocalAddress = options.isLocalAddress;
  }

  /** The config text this manager runs with, once read. */
  get configText(): string | undefined {
    return this.#configText;
  }

  /** The lease this manager holds now, if any. */
  get lease(): Lease | undefined {
    return this.#own ? ownLease(this.#own) : undefined;
  }

  async getNetworkConfig(signal: AbortSignal): Promise<NetworkConfig> {
    let lastProblem = '';
    for (;;) {
      try {
        const text = await this.#registry.getNetworkConfig(signal);
        const config = parseNetworkConfig(text, 'etcd');
        this.#checkConfig(config);
        for (const warning of config.warnings) this.#log.warn({}, warning);
        this.#config = config;
        this.#configText = text;
        return config;
      } catch (err) {
        if (signal.aborted) throw err;
        if (!(err instanceof WeftError)) throw err;
        // The operator may be about to write or fix it: retry each second, logging each new problem once.
        const problem = errorMessage(err);
        if (problem !== lastProblem) this.#log.warn({ err }, "Couldn't fetch network config; retrying every second");
        lastProblem = problem;
      }
      await this.#clock.sleep(1000, signal);
    }
  }

  async acquireLease(attrs: LeaseAttrs, signal: AbortSignal): Promise<Lease> {
    const config = await this.getNetworkConfig(signal);
    const own = await this.#patiently('acquire a lease', () => this.#acquire(config, attrs, this.#previous, false, signal), signal);
    this.#attrs = attrs;
    this.#own = own;
    this.#reservation = own.ttlLease === '0';
    this.#log.info({ subnet: formatSubnetPair(own.subnet), publicIp: formatPublicIps(attrs) }, 'lease acquired');
    publishLease(own);
    return ownLease(own);
  }

  async *holdLease(signal: AbortSignal): AsyncGenerator<Lease> {
    if (!this.#own || !this.#attrs || !this.#config) throw new WeftError(ErrorCodes.INTERNAL, 'holdLease called before acquireLease');
    const retry = new Backoff({ initialMs: 1000, maxMs: 60_000, random: this.#random });
    while (!signal.aborted) {
      const watched = this.#own.subnet;
      const stop = new AbortController();
      const scope = AbortSignal.any([signal, stop.signal]);
      const queue = new AsyncQueue<LeaseWatchEvent[]>();
      const pump = (async () => {
        for await (const batch of watchLeaseSet({ registry: this.#registry, log: this.#log, subnet: watched, clock: this.#clock, signal: scope })) {
          queue.push(batch);
        }
      })();
      try {
        let first = true;
        let renewAt = this.#renewAt();
        for (;;) {
          const batch = await this.#nextOrTimeout(queue, renewAt, scope);
          if (batch === undefined) {
            // Renewal due, or a failed one to retry. A lost guard (someone wrote the key) is
            // retried too: the watch delivers that write meanwhile and updates what we compare to.
            try {
              await this.#renew(signal);
            } catch (err) {
              if (signal.aborted) return;
              const wait = retry.next();
              this.#log.error({ err, retryMs: wait }, 'Error renewing lease; trying again');
              publish('lease.renewal', { ok: false });
              renewAt = this.#clock.now() + wait;
              continue;
            }
            retry.reset();
            renewAt = this.#renewAt();
            yield ownLease(this.#own);
            continue;
          }
          if (this.#applyOwnEvents(batch, first)) break;
          first = false;
          this.#watchingOwn = true;
          renewAt = Math.min(renewAt, this.#renewAt());
        }
      } catch (err) {
        if (signal.aborted) return;
        throw err;
      } finally {
        this.#watchingOwn = false;
        stop.abort();
        await pump;
      }
      // The key is gone or taken over: acquire again, preferring the same subnet.
      const before = this.#own.subnet;
      const taken = await this.#takeBack(retry, signal);
      if (!taken) return;
      this.#log.warn(
        { subnet: formatSubnetPair(taken.subnet), previous: formatSubnetPair(before) },
        subnetPairEquals(before, taken.subnet) ? 'lease taken back' : 'lease taken back on a different subnet',
      );
      yield ownLease(taken);
    }
  }

  /**
   * Whether the registry still holds this node's lease as written, for the health endpoint. While
   * holdLease watches the lease's key, from that watch, as of when the registry last proved the
   * watch alive: no request. Otherwise it asks the registry, and rejects when it cannot be reached.
   */
  async checkLease(signal: AbortSignal): Promise<LeaseCheck> {
    const own = this.#own;
    if (!own || !this.#attrs) return { held: false, confirmedAt: this.#clock.now() };
    if (this.#watchingOwn) return { held: leaseAttrsEqual(own.attrs, this.#attrs), confirmedAt: this.#registry.lastAlive() };
    const snap = await this.#registry.getLeases({ subnet: own.subnet, signal });
    const stored = snap.leases[0];
    return { held: stored !== undefined && leaseAttrsEqual(stored.attrs, this.#attrs), confirmedAt: this.#clock.now() };
  }

  async previousAttrs(publicIp: IpAddr, signal: AbortSignal): Promise<LeaseAttrs | undefined> {
    const snap = await this.#patiently('read this node\'s earlier lease', () => this.#registry.getLeases({ signal }), signal);
    return snap.leases.find((l) => {
      const theirs = publicIpOf(l.attrs, publicIp.family);
      return theirs !== undefined && ipEquals(theirs, publicIp);
    })?.attrs;
  }

  async *watchLeases(signal: AbortSignal): AsyncGenerator<LeaseEvent[]> {
    // Peers are passed on as the registry decoded them, without the write guards (unguarded: no
    // peer's lease is written from here): what they may hold is checked in one place for every
    // registry, by the backend (backend/peer-checks.ts).
    // Each batch is let go once handed on (core/values.ts): the first is every peer, and this
    // generator stays suspended for as long as the registry is quiet.
    const batches = new Values(watchLeaseSet({ registry: this.#registry, log: this.#log, clock: this.#clock, signal, guards: false }));
    try {
      for (let first = true; ; first = false) {
        let batch = await batches.next();
        if (!batch) return;
        const own = this.#own?.subnet;
        // The leases as the watch keeps them, not copies: the reconciler keeps each for as long as
        // its peer lives, and sorts the first batch by `created`, the registry's creation order.
        let peers: LeaseEvent[] | undefined = own ? batch.filter((e) => !subnetPairEquals(e.lease.subnet, own)) : batch;
        batch = undefined;
        if (first || peers.length > 0) yield peers;
        peers = undefined;
      }
    } finally {
      await batches.close();
    }
  }

  /** Updates state from own-key events; true when the lease is lost. */
  #applyOwnEvents(batch: LeaseWatchEvent[], first: boolean): boolean {
    const own = this.#own!;
    if (first && !batch.some((e) => e.type === 'added')) {
      this.#log.warn({ subnet: formatSubnetPair(own.subnet) }, 'own lease is missing from the registry');
      publish('lease', { held: false });
      return true;
    }
    for (const event of batch) {
      if (event.type === 'removed') {
        this.#log.warn({ subnet: formatSubnetPair(own.subnet) }, 'own lease was removed (expired, deleted, or the registry was wiped)');
        publish('lease', { held: false });
        return true;
      }
      const seen = event.lease;
      if (seen.modRevision === this.#own!.modRevision) continue;
      if (!leaseAttrsEqual(seen.attrs, this.#attrs!)) {
        this.#log.warn(
          { subnet: formatSubnetPair(seen.subnet), publicIp: formatPublicIps(seen.attrs) },
          'own lease was overwritten by another writer; writing ours back',
        );
      }
      // Someone else wrote the key: its TTL is no longer ours to know, so rewrite it now.
      this.#own = seen;
      this.#needsRewrite = true;
    }
    return false;
  }

  async #renew(signal: AbortSignal): Promise<void> {
    const own = this.#own!;
    const ttlSeconds = this.#reservation ? 0 : this.#ttlSeconds;
    this.#own = await this.#registry.updateLease(own, this.#attrs!, { ttlSeconds, signal });
    this.#needsRewrite = false;
    this.#log.info({ subnet: formatSubnetPair(own.subnet) }, 'lease renewed');
    publish('lease.renewal', { ok: true });
    publishLease(this.#own);
  }

  async #takeBack(retry: Backoff, signal: AbortSignal): Promise<StoredLease | undefined> {
    while (!signal.aborted) {
      try {
        this.#own = await this.#acquire(this.#config!, this.#attrs!, this.#own!.subnet, true, signal);
        publishLease(this.#own);
        this.#reservation = this.#own.ttlLease === '0';
        this.#needsRewrite = false;
        return this.#own;
      } catch (err) {
        if (signal.aborted) break;
        const wait = retry.next();
        this.#log.error({ err, retryMs: wait }, 'could not take the lease back; retrying');
        try {
          await this.#clock.sleep(wait, signal);
        } catch {
          break;
        }
      }
    }
    return undefined;
  }

  /** When the lease must be written next: `expiry - margin`; never for an untouched reservation. */
  #renewAt(): number {
    const now = this.#clock.now();
    if (this.#needsRewrite) return now;
    if (this.#reservation) return Infinity;
    const expiresAt = this.#own?.expiresAt;
    return expiresAt === undefined ? now : expiresAt - this.#marginMs;
  }

  /** The next batch, or undefined once `at` (ms since epoch) has come. */
  async #nextOrTimeout(queue: AsyncQueue<LeaseWatchEvent[]>, at: number, signal: AbortSignal): Promise<LeaseWatchEvent[] | undefined> {
    for (;;) {
      const wait = at - this.#clock.now();
      if (wait <= 0) return undefined;
      // The timer aborts the wait for a batch; a batch handed over first is never lost to it.
      const due = new AbortController();
      const done = new AbortController();
      void this.#clock.sleep(Math.min(wait, maxTimerMs), AbortSignal.any([signal, done.signal])).then(() => due.abort(), () => undefined);
      try {
        return await queue.next(AbortSignal.any([signal, due.signal]));
      } catch (err) {
        if (signal.aborted || !due.signal.aborted) throw err;
      } finally {
        done.abort();
      }
    }
  }

  /**
   * One lease for this node, in this order (spec §4.1, hardened):
   * 1. this node's lease on `preferred` (subnet.env's subnet at start, or the one it holds);
   * 2. at start only, a reservation (a lease without TTL, an operator's) carrying this node's
   *    public IP: how an operator moves a node, by deleting its lease and restarting it;
   * 3. `preferred` while no other node holds it, even when another lease carries this public
   *    IP: a lease planted with a node's address must not move it off the subnet its pods use;
   * 4. the oldest lease carrying this node's public IP (flannel's reuse by public IP);
   * 5. a new subnet, keeping the families of 1-4 that still fit (EnableIPv6 turned on or off
   *    leaves the IPv4 subnet as it was).
   * Several leases carrying this public IP are reported (one of them may be planted).
   */
  async #acquire(config: NetworkConfig, attrs: LeaseAttrs, preferred: SubnetPair | undefined, holding: boolean, signal: AbortSignal): Promise<StoredLease> {
    const backoff = new Backoff({ initialMs: 20, maxMs: 1000, random: this.#random });
    if (preferred && !fitsSomewhere(config, preferred)) {
      this.#log.info({ subnet: formatSubnetPair(preferred) }, 'previous subnet does not fit the network config; ignoring it');
    }
    let reported = '';
    for (let attempt = 1; attempt <= maxAcquireAttempts; attempt++) {
      const snap = await this.#registry.getLeases({ signal });
      const mine = snap.leases.filter((l) => sameNode(config, l.attrs, attrs)).sort(byAge);
      const report = mine.map((l) => formatSubnetPair(l.subnet)).join(' ');
      if (mine.length > 1 && report !== reported) {
        this.#log.warn({ subnets: report, publicIp: formatPublicIps(attrs) }, 'several leases carry this node\'s public IP; one of them may have been planted');
      }
      if (report !== reported) publish('lease.duplicates', { count: mine.length });
      reported = report;
      const others = snap.leases.filter((l) => !mine.includes(l)).map((l) => l.subnet);
      const held = preferred ? mine.find((l) => subnetPairEquals(l.subnet, preferred)) : undefined;
      const reservation = mine.find((l) => l.ttlLease === '0' && isCompatible(config, l.subnet));
      const chosen = held ?? (holding ? undefined : reservation) ?? (preferred && isFree(config, preferred, others) ? undefined : mine.find((l) => isCompatible(config, l.subnet)));
      if (chosen && isCompatible(config, chosen.subnet)) {
        const address = config.enableIPv4 ? attrs.publicIp : attrs.publicIpv6;
        if (chosen !== held && chosen !== reservation && !holding && address && this.#isLocalAddress && !this.#isLocalAddress(address)) {
          throw new WeftError(
            ErrorCodes.CONFIG,
            `the lease of ${formatSubnetPair(chosen.subnet)} carries this node's public IP ${formatIp(address)}, which is not an address of this host, and the subnet file does not name it: another node may own it (a copied --public-ip?). If this node is behind NAT and was reinstalled, delete that lease or restore its subnet file`,
          );
        }
        try {
          // A reservation (no TTL lease) stays one.
          const ttlSeconds = chosen.ttlLease === '0' ? 0 : this.#ttlSeconds;
          return await this.#registry.updateLease(chosen, attrs, { ttlSeconds, signal });
        } catch (err) {
          if (!isWeftError(err, ErrorCodes.LEASE_CHANGED)) throw err;
          continue;
        }
      }
      // Nothing to reuse whole: a new key, keeping what still fits of the subnet held, subnet.env's
      // or this node's lease, each while no other node holds it.
      const partial = [held, ...(preferred ? [{ subnet: preferred }] : []), ...mine].find((l) => l && fitsSomewhere(config, l.subnet) && isFree(config, l.subnet, others));
      // Node addresses may lie inside the network (a 10/8 Network around the nodes): a subnet
      // holding one would take that node's underlay traffic into the overlay, so they count as taken.
      const addresses = nodeAddresses([attrs, ...snap.leases.map((l) => l.attrs)]);
      const taken = [...snap.leases.map((l) => l.subnet), ...addresses];
      let subnet: SubnetPair;
      try {
        subnet = partial ? allocateSubnet(config, taken.filter((t) => !subnetPairEquals(t, partial.subnet)), this.#random, partial.subnet) : allocateSubnet(config, taken, this.#random);
      } catch (err) {
        if (!isWeftError(err, ErrorCodes.OUT_OF_SUBNETS) || mine.length === 0) throw err;
        // This node's unfitting leases hold places it can use once they are gone.
        subnet = allocateSubnet(config, [...others, ...addresses], this.#random);
      }
      if (preferred && attempt === 1 && !subnetPairEquals(subnet, preferred) && fitsSomewhere(config, preferred)) {
        const by = blockers(config, others, preferred)[0];
        if (by) this.#log.info({ subnet: formatSubnetPair(preferred), heldBy: formatSubnetPair(by) }, 'previous subnet is leased by another node; allocating a new one');
      }
      try {
        const created = await this.#registry.createLease(subnet, attrs, { ttlSeconds: this.#ttlSeconds, signal });
        if (await this.#claimedBefore(config, attrs, created, signal)) {
          this.#log.info({ subnet: formatSubnetPair(created.subnet) }, 'an older lease holds part of this subnet (two nodes allocated at once); allocating again');
          await this.#registry.deleteLease(created, signal);
          await this.#clock.sleep(backoff.next(), signal);
          continue;
        }
        // This node's leases that no longer fit the config (a family added or dropped): gone
        // once the new one is written, so that its IPv4 subnet is never free in between.
        for (const old of mine) {
          if (isCompatible(config, old.subnet) || subnetPairEquals(old.subnet, subnet)) continue;
          this.#log.warn({ subnet: formatSubnetPair(old.subnet), now: formatSubnetPair(subnet) }, 'deleting this node\'s lease: it does not fit the network config');
          await this.#registry.deleteLease(old, signal);
        }
        return created;
      } catch (err) {
        if (!isWeftError(err, ErrorCodes.SUBNET_TAKEN)) throw err;
        this.#log.debug({ subnet: formatSubnetPair(subnet), attempt }, 'lost a race for a subnet; listing again');
        await this.#clock.sleep(backoff.next(), signal);
      }
    }
    throw new WeftError(ErrorCodes.MAX_RETRIES, `max retries reached trying to acquire a subnet (${maxAcquireAttempts} attempts)`);
  }

  /**
   * Whether another node's lease created before `created` overlaps it. A dual-stack key names both
   * subnets and its create is guarded on that key only, so two nodes that listed before either
   * wrote can take one IPv6 (or IPv4) subnet under two keys (seen in an end-to-end test with three
   * nodes started together); flanneld's keys have the same gap. The newer lease gives way; the
   * older one's node, checking the same way, keeps its lease. Single-family keys are the subnet
   * itself, which the guard covers.
   */
  async #claimedBefore(config: NetworkConfig, attrs: LeaseAttrs, created: StoredLease, signal: AbortSignal): Promise<boolean> {
    if (!config.ipv4 || !config.ipv6) return false;
    const snap = await this.#registry.getLeases({ signal });
    return snap.leases.some(
      (l) => !subnetPairEquals(l.subnet, created.subnet) && !sameNode(config, l.attrs, attrs) && (l.created ?? 0) < (created.created ?? Infinity) && blockers(config, [l.subnet], created.subnet).length > 0,
    );
  }

  /**
   * Runs `op` until it succeeds, waiting out registry failures (unreachable, erroring, malformed
   * answers) with backoff and one log line per new problem; other errors end it.
   */
  async #patiently<T>(what: string, op: () => Promise<T>, signal: AbortSignal): Promise<T> {
    const retry = new Backoff({ initialMs: 500, maxMs: 30_000, random: this.#random });
    let lastProblem = '';
    for (;;) {
      try {
        const result = await op();
        if (lastProblem) this.#log.info({}, `etcd answered; went on to ${what}`);
        return result;
      } catch (err) {
        if (signal.aborted || !isRetriable(err)) throw err;
        const problem = errorMessage(err);
        if (problem !== lastProblem) this.#log.warn({ err }, `could not ${what}; retrying`);
        lastProblem = problem;
        await this.#clock.sleep(retry.next(), signal);
      }
    }
  }
}

/** The lease belongs to this node: same public IP in the first enabled family. */
function sameNode(config: NetworkConfig, a: LeaseAttrs, b: LeaseAttrs): boolean {
  if (config.enableIPv4) return a.publicIp !== undefined && b.publicIp !== undefined && ipEquals(a.publicIp, b.publicIp);
  return a.publicIpv6 !== undefined && b.publicIpv6 !== undefined && ipEquals(a.publicIpv6, b.publicIpv6);
}

/** Some family of `pair` is a subnet the config hands out. */
function fitsSomewhere(config: NetworkConfig, pair: SubnetPair): boolean {
  return (config.ipv4 !== undefined && pair.ipv4 !== undefined && inRange(config.ipv4, pair.ipv4)) || (config.ipv6 !== undefined && pair.ipv6 !== undefined && inRange(config.ipv6, pair.ipv6));
}

/** No lease of another node that holds a place in the network overlaps `pair`. */
function isFree(config: NetworkConfig, pair: SubnetPair, others: readonly SubnetPair[]): boolean {
  return blockers(config, others, pair).length === 0;
}

/** Oldest first, by the registry's creation order; leases without one keep their order. */
function byAge(a: StoredLease, b: StoredLease): number {
  return (a.created ?? Infinity) - (b.created ?? Infinity) || 0;
}

function ownLease(own: StoredLease): Lease {
  return { subnet: own.subnet, attrs: own.attrs, ...(own.expiresAt !== undefined ? { expiresAt: own.expiresAt } : {}) };
}

function publishLease(own: StoredLease): void {
  publish('lease', { held: true, ...(own.expiresAt !== undefined ? { expiresAt: own.expiresAt } : {}) });
}

/** Public addresses as one-address "subnets", for the allocator to avoid. */
function nodeAddresses(attrs: readonly LeaseAttrs[]): SubnetPair[] {
  const out: SubnetPair[] = [];
  for (const a of attrs) {
    if (a.publicIp && a.publicIp.value !== 0n) out.push({ ipv4: { ip: a.publicIp, prefix: 32 } });
    if (a.publicIpv6) out.push({ ipv6: { ip: a.publicIpv6, prefix: 128 } });
  }
  return out;
}
