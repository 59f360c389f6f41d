/**
 * Keeps the kernel equal to what the leases ask for, shared by every backend (flannel copies this
 * loop into each backend and polls; weft reacts).
 *
 * Design notes:
 * - The desired state is a map peer → program (routes, neighbours, FDB entries), computed by the
 *   backend from each lease. Events change that map and apply only the difference at once: a
 *   removed lease deletes exactly its own entries.
 * - A full reconcile lists the kernel's entries in the backend's scope and repairs both ways:
 *   missing or different entries are written, entries in scope that no lease asks for are
 *   removed. It runs after the first (complete) batch of leases, and whenever the kernel reports
 *   a change that departs from the desired state (netlink monitor, debounced; the echo of our own
 *   writes is not one): a hand-deleted route comes back within a fraction of a second, without
 *   polling. A slow periodic pass covers a monitor that overflowed.
 * - Within a peer, entries are written neighbour, FDB, then route, as flannel does, so a route
 *   never points at a next hop the kernel cannot resolve yet.
 * - Kernel requests go one at a time. The work is CPU-bound in this process, so requests in
 *   flight buy little (3000 requests: 93 ms one at a time, 84 ms four at a time), and the
 *   `netlink` addon keeps native send records for them that stay resident as a high-water mark:
 *   1.7 MB at four in flight, 2.9 MB at 32, none at one.
 */
import { delay } from '../core/abort.js';
import { Backoff } from '../core/backoff.js';
import { type KernelEntryKind, publish } from '../core/events.js';
import { errorMessage } from '../core/errors.js';
import { memoryFigures, releaseMemory, releaseMemoryAtMostEvery } from '../core/memory.js';
import type { Logger } from '../core/log.js';
import { type Cidr, containsCidr, overlaps } from '../ip/cidr.js';
import { type Family, formatIp } from '../ip/ip.js';
import { type Lease, type LeaseEvent, formatSubnetPair } from '../lease/lease.js';
import { formatSubnetKey } from '../lease/subnet-key.js';
import type { FdbSpec, NeighbourInfo, Netlink, RouteInfo } from '../netlink/netlink.js';
import {
  type ChangeScope, DesiredState, type EntryIndex, type PeerProgram, type TunnelSpec, fdbKey, fdbMatches, neighKey, neighbourMatches, routeKey, routeMatches,
} from './desired-state.js';
import { type Refusal, isRefusal } from './lease-program.js';
import { type KnownPeer, type PeerStatus, type RefusedPeer, peerCounts, peerStatus } from './peer-report.js';


/** What a backend tells the reconciler. */
export interface ReconcileScope extends ChangeScope {
  /** The program for a peer, or a reason to refuse it (logged once), or null to ignore it quietly. */
  program(lease: Lease): PeerProgram | Refusal | null;
  /** Route families in play. */
  readonly families: readonly Family[];
  /** Repairs the node's own device (recreate, address, up) if needed; true when it changed. */
  repairDevice?(signal: AbortSignal): Promise<boolean>;
  /** Entries the node wants whatever its peers (udp: the route for the whole network via its TUN). */
  own?(): PeerProgram;
  /** Told the forwarding entries of all programmed peers whenever they may have changed (udp). */
  tunnelsChanged?(tunnels: readonly TunnelSpec[]): void;
}

export interface ReconcilerOptions {
  readonly netlink: Netlink;
  readonly log: Logger;
  readonly scope: ReconcileScope;
  /** Quiet time after a kernel change before the full reconcile. Default 50 ms. */
  readonly debounceMs?: number;
  /** Safety-net full reconcile period. Default 60 s. */
  readonly periodMs?: number;
}


export class Reconciler {
  readonly #nl: Netlink;
  readonly #log: Logger;
  readonly #scope: ReconcileScope;
  readonly #debounceMs: number;
  readonly #periodMs: number;
  readonly #peers = new Map<string, KnownPeer>();
  /** The entries of all programs in #peers. */
  readonly #desired = new DesiredState();
  /** The part of #desired that is the node's own (ReconcileScope.own). */
  #own: PeerProgram | undefined;
  /** Leases refused, whole or in part, with the reason (logged once per reason) and since when. */
  readonly #refused = new Map<string, RefusedPeer>();
  #synced = false;
  /** Set by a failed kernel write; the run loop then schedules a full reconcile with backoff. */
  #writeFailed = false;
  readonly #retry = new Backoff({ initialMs: 500, maxMs: 30_000 });
  #retryTimer: NodeJS.Timeout | undefined;
  #unparsedSeen = false;
  /** Off for the first pass, which programs every peer rather than repairing anything. */
  #countRepairs = false;
  /** Kernel writes that failed, ever: a pass that adds none resets the retry backoff. */
  #failedWrites = 0;
  /** Event application and full reconciles never interleave. */
  #busy: Promise<unknown> = Promise.resolve();

  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#busy.then(work, work);
    this.#busy = result.then(() => undefined, () => undefined);
    return result;
  }

  constructor(options: ReconcilerOptions) {
    this.#nl = options.netlink;
    this.#log = options.log;
    this.#scope = options.scope;
    this.#debounceMs = options.debounceMs ?? 50;
    this.#periodMs = options.periodMs ?? 60_000;
  }



  async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    let dirty = false;
    let wake: (() => void) | undefined;
    const kick = (): void => {
      dirty = true;
      wake?.();
    };
    // A kernel write that failed is retried by a full reconcile after a backoff, not left for the
    // next notification or the periodic pass; a clean pass resets the backoff.
    const afterWork = (): void => {
      if (!this.#writeFailed) return;
      this.#writeFailed = false;
      if (this.#retryTimer || signal.aborted) return;
      const wait = this.#retry.next();
      this.#log.warn({ retryMs: wait }, 'a kernel write failed; reconciling again after a pause');
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = undefined;
        kick();
      }, wait);
    };
    signal.addEventListener('abort', () => clearTimeout(this.#retryTimer), { once: true });
    const monitor = (async () => {
      try {
        for await (const changes of this.#nl.subscribe(signal)) {
          if (!this.#synced) continue; // the first reconcile lists everything anyway
          if (!this.#unparsedSeen && changes.some((c) => c.kind === 'unparsed')) {
            this.#unparsedSeen = true;
            this.#log.warn({}, 'a kernel notification could not be read; comparing everything with the kernel (logged once)');
          }
          if (changes.some((c) => this.#desired.departs(c, this.#scope))) kick();
        }
      } catch (err) {
        if (!signal.aborted) this.#log.error({ err }, 'netlink monitor failed; relying on the periodic reconcile');
      }
    })();
    const repairer = (async () => {
      while (!signal.aborted) {
        if (!dirty) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(done, this.#periodMs);
            function done(): void {
              clearTimeout(timer);
              signal.removeEventListener('abort', done);
              resolve();
            }
            wake = done;
            signal.addEventListener('abort', done, { once: true });
          });
          wake = undefined;
        }
        if (signal.aborted) return;
        // Let a burst of kernel notifications settle into one pass.
        try {
          await delay(this.#debounceMs, signal);
        } catch {
          return;
        }
        dirty = false;
        if (!this.#synced) continue;
        const before = this.#failedWrites;
        await this.reconcile(signal);
        if (this.#failedWrites === before) this.#retry.reset();
        afterWork();
        // A pass lists every route, neighbour and FDB entry: 3 MB of garbage with 1000 peers,
        // which V8 would otherwise keep as heap for good.
        releaseMemoryAtMostEvery(30_000);
      }
    })();
    try {
      for await (const batch of events) {
        if (this.#synced) {
          const t0 = performance.now();
          await this.apply(batch, signal);
          publish('events.applied', { seconds: (performance.now() - t0) / 1000 });
          this.#publishPeers();
          this.#publishTunnels();
          afterWork();
        } else {
          // The first batch is the whole set: record it and let one reconcile write only what
          // the kernel lacks (nothing at all after a restart), instead of rewriting every entry.
          for (const event of batch) {
            const key = formatSubnetKey(event.lease.subnet);
            const program = event.type === 'added' ? this.#program(key, event.lease) : undefined;
            if (program) this.#setPeer(key, event.lease, program);
            else this.#deletePeer(key);
          }
          this.#synced = true;
          this.#setOwn();
          this.#publishTunnels();
          await this.reconcile(signal);
          this.#countRepairs = true;
          this.#publishPeers();
          afterWork();
          this.#log.info({ peers: this.#peers.size }, 'initial peers programmed');
          // The initial burst leaves garbage that would stay resident for a long time, and start-up
          // code that may never run again.
          releaseMemory({ code: true });
          this.#log.info(memoryFigures(), 'memory released after the initial burst');
        }
      }
    } finally {
      kick();
      await Promise.allSettled([monitor, repairer]);
    }
  }

  /** Applies lease events: programs added peers, removes exactly the entries of removed ones. */
  apply(batch: readonly LeaseEvent[], signal: AbortSignal): Promise<void> {
    return this.#exclusive(() => this.#apply(batch, signal));
  }

  async #apply(batch: readonly LeaseEvent[], signal: AbortSignal): Promise<void> {
    const toAdd: Array<{ key: string; lease: Lease; program: PeerProgram }> = [];
    for (const event of batch) {
      const key = formatSubnetKey(event.lease.subnet);
      const old = this.#peers.get(key);
      if (event.type === 'removed') {
        this.#refused.delete(key);
        if (old) {
          this.#deletePeer(key);
          await this.#remove(old.program, old.lease);
          this.#log.info({ subnet: formatSubnetPair(old.lease.subnet) }, 'peer removed');
        }
        continue;
      }
      const program = this.#program(key, event.lease);
      if (!program) {
        if (old) {
          this.#deletePeer(key);
          await this.#remove(old.program, old.lease);
        }
        continue;
      }
      this.#setPeer(key, event.lease, program);
      // Entries of the old program that the new one no longer wants.
      if (old) await this.#remove(old.program, old.lease);
      toAdd.push({ key, lease: event.lease, program });
    }
    for (const { lease, program } of toAdd) {
      if (signal.aborted) break;
      await this.#write(program, lease);
    }
    if (toAdd.length > 0) this.#log.debug({ peers: toAdd.length }, 'peers programmed');
  }

  /** Compares the kernel with the desired state and repairs both ways. */
  reconcile(signal: AbortSignal): Promise<void> {
    return this.#exclusive(() => this.#reconcile(signal));
  }

  async #reconcile(signal: AbortSignal): Promise<void> {
    const t0 = performance.now();
    try {
      if (this.#scope.repairDevice && (await this.#scope.repairDevice(signal))) {
        // Programs name the device by index, which a recreated device no longer has.
        for (const [key, peer] of [...this.#peers]) {
          const program = this.#program(key, peer.lease);
          if (program) this.#setPeer(key, peer.lease, program);
          else this.#deletePeer(key);
        }
        this.#setOwn();
        this.#publishTunnels();
        this.#log.warn({ peers: this.#peers.size }, 'device repaired; re-programming every peer');
        publish('repair', { kind: 'device' });
      }
      const devices = this.#scope.devices();
      const want = this.#desired;
      let repairs = 0;
      if (devices.length > 0) {
        const haveNeigh = new Map<string, NeighbourInfo>();
        for (const d of devices) for (const n of await this.#nl.neighbours(d.index, d.family)) if (n.permanent) haveNeigh.set(neighKey(n), n);
        repairs += await this.#converge('neighbour', want.neighbours, haveNeigh, neighbourMatches, (n) => this.#nl.replaceNeighbour(n), (n) => this.#nl.deleteNeighbour(n));
        const haveFdb = new Map<string, FdbSpec>();
        for (const d of devices) for (const f of await this.#nl.fdb(d.index)) if (f.dst && f.permanent) haveFdb.set(fdbKey(f), { index: f.index, mac: f.mac, dst: f.dst });
        repairs += await this.#converge('fdb', want.fdb, haveFdb, fdbMatches, (f) => this.#nl.replaceFdb(f), (f) => this.#nl.deleteFdb(f));
      }
      const haveRoutes = new Map<string, RouteInfo>();
      for (const family of this.#scope.families) {
        for (const r of await this.#nl.routes(family)) if (this.#scope.ownsRoute(r)) haveRoutes.set(routeKey(r), r);
      }
      repairs += await this.#converge('route', want.routes, haveRoutes, routeMatches, (r) => this.#nl.replaceRoute(r), (r) => this.#nl.deleteRoute(r));
      if (repairs > 0) {
        this.#log.info({ entries: repairs }, 'kernel state brought in line with the leases');
      }
    } catch (err) {
      if (!signal.aborted) this.#log.error({ err }, 'reconcile failed; will retry on the next change');
    }
    publish('reconcile', { seconds: (performance.now() - t0) / 1000 });
  }

  #setOwn(): void {
    if (!this.#scope.own) return;
    if (this.#own) this.#desired.remove(this.#own);
    this.#own = this.#scope.own();
    this.#desired.add(this.#own);
  }

  #publishTunnels(): void {
    if (!this.#scope.tunnelsChanged) return;
    const tunnels: TunnelSpec[] = [];
    for (const peer of this.#peers.values()) if (peer.program.tunnels) tunnels.push(...peer.program.tunnels);
    this.#scope.tunnelsChanged(tunnels);
  }

  /** Peers programmed, and refused by reason, per family, for the metrics. */
  #publishPeers(): void {
    for (const counts of peerCounts(this.#scope.families, this.#peers, this.#refused)) publish('peers', counts);
  }

  /**
   * Makes one kind of kernel entry (`have`: those in scope) equal to `want`: writes what is
   * missing or different, removes what no peer wants. Returns the number of changes.
   */
  async #converge<W extends object, H>(
    kind: KernelEntryKind,
    want: EntryIndex<W>,
    have: ReadonlyMap<string, H>,
    matches: (want: W, have: H) => boolean,
    replace: (entry: W) => Promise<void>,
    remove: (entry: H) => Promise<void>,
  ): Promise<number> {
    let changes = 0;
    for (const [key, entry] of want) {
      const current = have.get(key);
      if (current && matches(entry, current)) continue;
      await this.#try(() => replace(entry), kind, 'replace', key);
      if (this.#countRepairs) publish('repair', { kind });
      changes++;
    }
    for (const [key, entry] of have) {
      if (want.has(key)) continue;
      await this.#try(() => remove(entry), kind, 'delete', key);
      if (this.#countRepairs) publish('repair', { kind });
      changes++;
    }
    return changes;
  }

  /** Every peer lease it knows, programmed or refused, for `weft status`. */
  status(): PeerStatus[] {
    return peerStatus(this.#peers, this.#refused, this.#synced);
  }

  #setPeer(key: string, lease: Lease, program: PeerProgram): void {
    this.#deletePeer(key);
    this.#peers.set(key, { lease, program, since: Date.now() });
    this.#desired.add(program);
  }

  #deletePeer(key: string): void {
    const old = this.#peers.get(key);
    if (!old) return;
    this.#peers.delete(key);
    this.#desired.remove(old.program);
  }

  #program(key: string, lease: Lease): PeerProgram | undefined {
    const result = this.#scope.program(lease);
    if (result === null || result.refused === undefined) {
      this.#refused.delete(key);
      return result === null || isRefusal(result) ? undefined : result;
    }
    const reason = result.refused;
    const whole = isRefusal(result);
    const prev = this.#refused.get(key);
    if (prev?.reason !== reason) {
      if (whole) this.#log.warn({ subnet: formatSubnetPair(lease.subnet), publicIp: formatIp(lease.attrs.publicIp) }, `refusing lease: ${reason}`);
      else this.#log.warn({ subnet: formatSubnetPair(lease.subnet) }, `programming only part of a lease: ${reason}`);
    }
    const families = result.refusedFamilies ?? (whole ? this.#scope.families.map((family) => ({ family, code: (result as Refusal).code })) : []);
    this.#refused.set(key, { reason, lease, whole, families, since: prev?.reason === reason ? prev.since : Date.now() });
    return whole ? undefined : result;
  }

  async #write(p: PeerProgram, lease: Lease): Promise<void> {
    const subnet = formatSubnetPair(lease.subnet);
    for (const n of p.neighbours) if (!(await this.#try(() => this.#nl.replaceNeighbour(n), 'neighbour', 'replace', subnet))) return;
    for (const f of p.fdb) {
      if (!(await this.#try(() => this.#nl.replaceFdb(f), 'fdb', 'replace', subnet))) {
        for (const n of p.neighbours) await this.#try(() => this.#nl.deleteNeighbour(n), 'neighbour', 'delete', subnet);
        return;
      }
    }
    for (const r of p.routes) await this.#try(() => this.#nl.replaceRoute(r), 'route', 'replace', subnet);
  }

  /**
   * Removes what no remaining peer still wants (two leases may share a next hop or a VtepMAC); an
   * entry that another peer still wants in another form (the FDB entry of a shared MAC, now
   * pointing at the other peer) is written as that peer wants it.
   */
  async #remove(p: PeerProgram, lease: Lease): Promise<void> {
    const subnet = formatSubnetPair(lease.subnet);
    const want = this.#desired;
    const nl = this.#nl;
    const settle = async <T extends object>(entries: readonly T[], index: EntryIndex<T>, key: (e: T) => string, same: (a: T, b: T) => boolean, kind: KernelEntryKind, del: (e: T) => Promise<void>, put: (e: T) => Promise<void>): Promise<void> => {
      for (const e of entries) {
        const still = index.get(key(e));
        if (!still) await this.#try(() => del(e), kind, 'delete', subnet);
        else if (!same(still, e)) await this.#try(() => put(still), kind, 'replace', subnet);
      }
    };
    await settle(p.routes, want.routes, routeKey, routeMatches, 'route', (r) => nl.deleteRoute(r), (r) => nl.replaceRoute(r));
    await settle(p.fdb, want.fdb, fdbKey, fdbMatches, 'fdb', (f) => nl.deleteFdb(f), (f) => nl.replaceFdb(f));
    await settle(p.neighbours, want.neighbours, neighKey, (a, b) => neighbourMatches(a, { ...b, permanent: true }), 'neighbour', (n) => nl.deleteNeighbour(n), (n) => nl.replaceNeighbour(n));
  }

  /** One kernel write; a failure is logged and published, and makes the run loop retry later. */
  async #try(op: () => Promise<void>, kind: KernelEntryKind, write: 'replace' | 'delete', subject: string): Promise<boolean> {
    try {
      await op();
      publish('kernel.write', { kind, op: write, ok: true });
      return true;
    } catch (err) {
      this.#log.error({ err, subject, detail: errorMessage(err) }, `failed to ${write} ${kind === 'fdb' ? 'fdb entry' : kind}`);
      publish('kernel.write', { kind, op: write, ok: false });
      this.#writeFailed = true;
      this.#failedWrites++;
      return false;
    }
  }
}

/**
 * A route inside the cluster network and outside this node's own subnet (the kernel's own route
 * to the device's IPv6 /128 lies inside it, as does the bridge's).
 */
export function inClusterScope(dst: Cidr, network: Cidr | undefined, own: Cidr | undefined): boolean {
  return network !== undefined && containsCidr(network, dst) && !(own && overlaps(dst, own));
}
