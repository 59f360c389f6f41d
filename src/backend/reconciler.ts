/**
 * Keeps the kernel equal to what the leases ask for, shared by every backend (flannel copies this
 * loop into each backend and polls; weft reacts).
 *
 * Design notes:
 * - The kernel is a list of entry kinds (entry-kind.ts), in write order; the reconciler knows
 *   none by name. The desired state is the union of one program per peer (and the node's own),
 *   computed by the backend from each lease. Events change that union and apply only the
 *   difference at once: a removed lease deletes exactly its own entries.
 * - A full reconcile lists each kind in the backend's scope and repairs both ways: missing or
 *   different entries are written, entries in scope that no program wants are removed. It runs
 *   after the first (complete) batch of leases, and whenever the kernel reports a change that
 *   departs from the desired state (netlink monitor, debounced; the echo of our own writes is not
 *   one): a hand-deleted route comes back within a fraction of a second, without polling. A slow
 *   periodic pass covers a monitor that overflowed.
 * - Kinds are written in the backend's order (vxlan: neighbour, FDB, then route, as flannel
 *   does), every peer's entries of one kind before any of the next, so a route never points at a
 *   next hop the kernel cannot resolve yet. A failed write stops the peer at that kind and takes
 *   the entries of earlier kinds back out; the last kind has nothing after it, so its other
 *   entries still go in. Removal runs in reverse.
 * - A pass, or a batch of lease events, writes each kind's entries of every peer together, up to
 *   64 in flight: the Netlink adapter sends writes made together in batches of many messages per
 *   system call (rt-channel.ts), so 3000 entries cost about 50 round trips to the kernel, not 3000.
 */
import { Backoff, type BackoffOptions } from '../core/backoff.js';
import { type Clock, systemClock } from '../core/clock.js';
import { publish } from '../core/events.js';
import { errorMessage } from '../core/errors.js';
import { memoryFigures, releaseMemory, releaseMemoryAtMostEvery } from '../core/memory.js';
import { Values } from '../core/values.js';
import type { Logger } from '../core/log.js';
import { type Family, type IpAddr, formatIp } from '../ip/ip.js';
import { formatCidr } from '../ip/cidr.js';
import { type Lease, type LeaseEvent, formatPublicIps, formatSubnetPair } from '../lease/lease.js';
import { formatSubnetKey } from '../lease/subnet-key.js';
import type { Netlink, NetlinkChange } from '../netlink/netlink.js';
import { DesiredState } from './desired-state.js';
import type { EntryKind, PeerProgram, Program } from './entry-kind.js';
import { type KeptProgram, entriesOfKind, forEachOfKind, keep, wantsEntry } from './kept-program.js';
import { type Refusal, isRefusal } from './lease-program.js';
import { UnderlayIndex } from './underlay-clash.js';
import { passPeriodMs } from './liveness-pass.js';
import { type KnownPeer, type PeerStatus, type RefusedPeer, peerCounts, peerStatus } from './peer-report.js';

/** What a backend tells the reconciler. */
export interface ReconcileScope {
  /** The kinds of entry the backend manages, in write order. */
  readonly kinds: readonly EntryKind[];
  /** Families in play, for the per-family counts. */
  readonly families: readonly Family[];
  /** The program for a peer, or a reason to refuse it (logged once), or null to ignore it quietly. */
  program(lease: Lease): PeerProgram | Refusal | null;
  /** Entries the node wants whatever its peers (udp: the route for the whole network via its TUN). */
  own?(): Program;
  /** Repairs the node's own devices (recreate, address, up) if needed; true when one was recreated. */
  repairDevices?(signal: AbortSignal): Promise<boolean>;
  /**
   * Links whose changes can undo this backend's entries unannounced (a link that goes down takes
   * its routes along without a route notification): its devices and the external interface.
   */
  links(): readonly number[];
}

export interface ReconcilerOptions {
  /** The kernel's notifications; writes go through the kinds. */
  readonly netlink: Pick<Netlink, 'subscribe'>;
  readonly log: Logger;
  readonly scope: ReconcileScope;
  readonly clock?: Clock;
  /** Quiet time after a kernel change before the full reconcile. Default 50 ms. */
  readonly debounceMs?: number;
  /** Safety-net full reconcile period. Default 60 s. */
  readonly periodMs?: number;
  /** The pause before a failed write is retried; default 500 ms doubling to 30 s. */
  readonly retry?: BackoffOptions;
}

export class Reconciler {
  readonly #nl: Pick<Netlink, 'subscribe'>;
  readonly #log: Logger;
  readonly #scope: ReconcileScope;
  readonly #kinds: readonly EntryKind[];
  readonly #clock: Clock;
  readonly #debounceMs: number;
  readonly #periodMs: number;
  readonly #peers = new Map<string, KnownPeer>();
  /** Peers programmed per family, kept as they come and go: counting them per event costs O(peers). */
  readonly #programmed = new Map<Family, number>();
  /** The entries of all programs in #peers, and of #own. */
  readonly #desired: DesiredState;
  /** Per kind (in #kinds' order), the entry wanted under a key. */
  readonly #wanted: ReadonlyArray<(key: string) => object | undefined>;
  /** The node's own program (ReconcileScope.own). */
  #own: Program | undefined;
  /** Leases refused, whole or in part, with the reason (logged once per reason) and since when. */
  readonly #refused = new Map<string, RefusedPeer>();
  #synced = false;
  /** Set by a failed kernel write; the run loop then schedules a full reconcile with backoff. */
  #writeFailed = false;
  /**
   * #failedWrites when the last full reconcile ended having failed nothing: while it differs, the
   * programs held may not all be in the kernel, and a changed lease is written whole (#held).
   */
  #failedAtClean = 0;
  readonly #retry: Backoff;
  #retryPending = false;
  #unparsedSeen = false;
  #overflowSeen = false;
  /** Leases refused because an established peer holds what they claim: tried again after changes. */
  readonly #conflicted = new Set<string>();
  /** The programmed peers' subnets and public IPs, for the clash of one's address with another's subnet. */
  readonly #underlay = new UnderlayIndex();
  /** Off for the first pass, which programs every peer rather than repairing anything. */
  #countRepairs = false;
  /** Kernel writes that failed, ever: a pass that adds none resets the retry backoff. */
  #failedWrites = 0;
  /** Event application and full reconciles never interleave. */
  #busy: Promise<unknown> = Promise.resolve();

  constructor(options: ReconcilerOptions) {
    this.#nl = options.netlink;
    this.#log = options.log;
    this.#scope = options.scope;
    this.#kinds = options.scope.kinds;
    this.#clock = options.clock ?? systemClock;
    this.#desired = new DesiredState(this.#kinds);
    this.#wanted = this.#kinds.map((kind) => {
      const index = this.#desired.of(kind);
      return (key: string) => index.get(key);
    });
    this.#debounceMs = options.debounceMs ?? 50;
    this.#periodMs = options.periodMs ?? passPeriodMs;
    this.#retry = new Backoff({ initialMs: 500, maxMs: 30_000, ...options.retry });
  }

  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#busy.then(work, work);
    this.#busy = result.then(() => undefined, () => undefined);
    return result;
  }

  async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    let dirty = false;
    let wake = new AbortController();
    const kick = (): void => {
      dirty = true;
      wake.abort();
    };
    // A kernel write that failed is retried by a full reconcile after a backoff, not left for the
    // next notification or the periodic pass; a clean pass resets the backoff.
    const afterWork = (): void => {
      if (!this.#writeFailed) return;
      this.#writeFailed = false;
      if (this.#retryPending || signal.aborted) return;
      const wait = this.#retry.next();
      this.#log.warn({ retryMs: wait }, 'a kernel write failed; reconciling again after a pause');
      this.#retryPending = true;
      this.#clock.sleep(wait, signal).then(
        () => {
          this.#retryPending = false;
          kick();
        },
        () => undefined,
      );
    };
    const monitor = (async () => {
      try {
        // The first reconcile lists everything anyway; after it, only departures are kept (the
        // echo of a pass's writes is dropped as it is read, not queued): every batch is a kick.
        const departs = (c: NetlinkChange): boolean => this.#synced && this.#departs(c);
        const kept = this.#nl.subscribe(signal, departs)[Symbol.asyncIterator]();
        while (!(await kept.next()).done) kick();
      } catch (err) {
        if (!signal.aborted) this.#log.error({ err }, 'netlink monitor failed; relying on the periodic reconcile');
      }
    })();
    // Kinds whose "kernel" announces its changes itself (entry-kind.ts).
    const outside = this.#kinds.map((kind) =>
      kind.onOutsideChange?.(() => {
        if (this.#synced) kick();
      }),
    );
    const repairer = (async () => {
      while (!signal.aborted) {
        if (!dirty) await this.#clock.sleep(this.#periodMs, AbortSignal.any([signal, wake.signal])).catch(() => undefined);
        wake = new AbortController();
        if (signal.aborted) return;
        // Let a burst of kernel notifications settle into one pass.
        try {
          await this.#clock.sleep(this.#debounceMs, signal);
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
    const batches = new Values(events);
    try {
      if (await this.#programFirst(batches, signal)) {
        afterWork();
        // The initial burst leaves garbage that would stay resident for a long time, and start-up
        // code that may never run again. The first batch went with #programFirst's frame; asked
        // for the next one, the sources up the chain (the manager's, the lease watch's) let go of it too.
        batches.ask();
        releaseMemory({ code: true });
        this.#log.info(memoryFigures(), 'memory released after the initial burst');
        await batches.each(async (batch) => {
          const t0 = performance.now();
          await this.apply(batch, signal);
          publish('events.applied', { seconds: (performance.now() - t0) / 1000 });
          this.#publishPeers();
          afterWork();
        });
      }
    } finally {
      // The lease source first, as `for await` would: a run that failed leaves no watch open.
      await batches.close();
      for (const unsubscribe of outside) unsubscribe?.();
      kick();
      await Promise.allSettled([monitor, repairer]);
    }
  }

  /**
   * The first batch is the whole set: recorded, and one reconcile writes only what the kernel lacks
   * (nothing at all after a restart) instead of rewriting every entry. False when the source ended
   * before it.
   */
  async #programFirst(batches: Values<readonly LeaseEvent[]>, signal: AbortSignal): Promise<boolean> {
    const batch = await batches.next();
    if (!batch) return false;
    // A collection first: the listing's garbage goes, and no marking cycle begun before it keeps
    // alive what the burst below allocates; and the code start-up ran is unmapped, so that its
    // pages do not stack on the burst's heap (the start-up peak, docs/benchmarks.md).
    releaseMemory({ code: true });
    // Oldest first, so that of two leases claiming one thing the established one keeps it.
    for (const event of [...batch].sort(byCreation)) {
      const key = event.key ?? formatSubnetKey(event.lease.subnet);
      const program = event.type === 'added' ? this.#program(key, event.lease) : undefined;
      if (program) this.#setPeer(key, event.lease, program);
      else this.#deletePeer(key);
    }
    this.#synced = true;
    this.#setOwn();
    await this.reconcile(signal);
    this.#countRepairs = true;
    this.#publishPeers();
    this.#log.info({ peers: this.#peers.size }, 'initial peers programmed');
    return true;
  }

  /** Applies lease events: programs added peers, removes exactly the entries of removed ones. */
  apply(batch: readonly LeaseEvent[], signal: AbortSignal): Promise<void> {
    return this.#exclusive(() => this.#apply(batch, signal));
  }

  async #apply(batch: readonly LeaseEvent[], signal: AbortSignal): Promise<void> {
    const toAdd: Written[] = [];
    const toRemove: Written[] = [];
    // What the kernel held, before this batch, for each peer the batch changes.
    const before = new Map<string, KeptProgram | undefined>();
    for (const event of batch) {
      const key = event.key ?? formatSubnetKey(event.lease.subnet);
      const old = this.#peers.get(key);
      if (!before.has(key)) before.set(key, old?.entries);
      if (event.type === 'removed') {
        this.#refused.delete(key);
        if (old) {
          this.#deletePeer(key);
          toRemove.push(written(key, old));
          this.#log.info({ subnet: formatSubnetPair(old.lease.subnet) }, 'peer removed');
        }
        continue;
      }
      const program = this.#program(key, event.lease);
      if (!program) {
        if (old) {
          this.#deletePeer(key);
          toRemove.push(written(key, old));
        }
        continue;
      }
      const peer = this.#setPeer(key, event.lease, program);
      // Entries of the old program that the new one no longer wants.
      if (old) toRemove.push(written(key, old));
      toAdd.push(written(key, peer));
    }
    // A lease refused for claiming what another held may have it now.
    if (this.#conflicted.size > 0 && batch.length > 0) {
      for (const key of [...this.#conflicted]) {
        const refused = this.#refused.get(key);
        if (!refused || this.#peers.has(key)) {
          this.#conflicted.delete(key);
          continue;
        }
        const program = this.#program(key, refused.lease);
        if (!program) continue;
        toAdd.push(written(key, this.#setPeer(key, refused.lease, program)));
      }
    }
    // Against the desired state after the whole batch: nothing is taken out that the batch puts
    // back, and only programs still current are written (a lease added and removed in one batch,
    // or changed twice, leaves programs behind that no peer holds any more).
    const put: Held = new Map();
    await this.#remove(toRemove, put);
    const current = toAdd.filter((w) => this.#peers.get(w.key)?.entries === w.entries);
    if (!signal.aborted) await this.#write(current, signal, this.#held(current, before, put));
    this.#flush();
    if (toAdd.length > 0) this.#log.debug({ peers: toAdd.length }, 'peers programmed');
  }

  /** Compares the kernel with the desired state and repairs both ways. */
  reconcile(signal: AbortSignal): Promise<void> {
    return this.#exclusive(() => this.#reconcile(signal));
  }

  /** Computes every program again and brings the kernel in line: after the node's own lease changed. */
  refresh(signal: AbortSignal): Promise<void> {
    return this.#exclusive(async () => {
      if (!this.#synced) return;
      this.reprogram();
      await this.#reconcile(signal);
      this.#publishPeers();
    });
  }

  async #reconcile(signal: AbortSignal): Promise<void> {
    const t0 = performance.now();
    const failedBefore = this.#failedWrites;
    try {
      if (this.#scope.repairDevices && (await this.#scope.repairDevices(signal))) {
        this.reprogram();
        this.#log.warn({ peers: this.#peers.size }, 'device repaired; re-programming every peer');
        publish('repair', { kind: 'device' });
      }
      let repairs = 0;
      for (const kind of this.#kinds) repairs += await this.#converge(kind, signal);
      if (repairs > 0) this.#log.info({ entries: repairs }, 'kernel state brought in line with the leases');
    } catch (err) {
      // A listing that failed (a dump the kernel cut short, one left unanswered) is tried again
      // after the same pause as a failed write, not left for the next change or the period.
      if (!signal.aborted) {
        this.#log.error({ err }, 'reconcile failed; trying again after a pause');
        this.#writeFailed = true;
        this.#failedWrites++;
      }
    }
    this.#flush();
    if (this.#failedWrites === failedBefore && !signal.aborted) this.#failedAtClean = this.#failedWrites;
    publish('reconcile', { seconds: (performance.now() - t0) / 1000 });
  }

  /**
   * Computes every program again, from the leases it holds (a recreated device has a new index,
   * which programs name; a new own subnet may change what a peer may have). The next reconcile
   * writes the difference.
   */
  reprogram(): void {
    for (const [key, peer] of [...this.#peers]) {
      const program = this.#program(key, peer.lease);
      if (program) this.#setPeer(key, peer.lease, program);
      else this.#deletePeer(key);
    }
    for (const { lease } of [...this.#refused.values()]) {
      const key = formatSubnetKey(lease.subnet);
      if (this.#peers.has(key)) continue;
      const program = this.#program(key, lease);
      if (program) this.#setPeer(key, lease, program);
    }
    if (this.#synced) this.#setOwn();
  }

  /** Whether a kernel notification may leave the kernel different from the desired state. */
  #departs(change: NetlinkChange): boolean {
    switch (change.kind) {
      case 'unparsed':
        if (!this.#unparsedSeen) {
          this.#unparsedSeen = true;
          this.#log.warn({}, 'a kernel notification could not be read; comparing everything with the kernel (logged once)');
        }
        return true;
      case 'overflow':
        // A burst (another program's, or the echo of a large pass) overran the monitor's buffer.
        if (!this.#overflowSeen) {
          this.#overflowSeen = true;
          this.#log.warn({ errno: change.errno }, 'kernel notifications were lost; comparing everything with the kernel (logged once)');
        }
        return true;
      case 'link':
        // Not every link: pods come and go on veth pairs all the time.
        return this.#scope.links().includes(change.index);
      case 'addr':
        // An IPv6 link-local address carries none of the backend's entries; the kernel gives a new
        // device one, and confirms it a second later, which would make two full passes after start.
        return this.#scope.links().includes(change.index) && !(change.ip && isIpv6LinkLocal(change.ip));
      default:
        // One lookup function per kind, made once: the initial burst echoes thousands of writes.
        return this.#kinds.some((kind, i) => kind.departs(change, this.#wanted[i]!));
    }
  }

  /**
   * Makes one kind's entries in scope equal to the desired state: writes what is missing or
   * different, removes what no program wants. Returns the number of changes.
   */
  async #converge(kind: EntryKind, signal: AbortSignal): Promise<number> {
    const want = this.#desired.of(kind);
    const have = new Map<string, object>();
    for (const e of await kind.list(signal, (key) => want.get(key))) have.set(kind.key(e), e);
    let changes = 0;
    const change = (write: 'replace' | 'delete', key: string, op: () => Promise<void>): Promise<unknown> => {
      changes++;
      if (this.#countRepairs) publish('repair', { kind: kind.name });
      return this.#try(kind, write, key, op);
    };
    await inWindows(want, ([key, entry]) => {
      const current = have.get(key);
      return current && kind.matches(entry, current) ? undefined : change('replace', key, () => kind.put(entry));
    });
    await inWindows(have, ([key, entry]) => (want.has(key) ? undefined : change('delete', key, () => kind.remove(entry))));
    return changes;
  }

  /** Every peer lease it knows, programmed or refused, for `weft status`. */
  status(): PeerStatus[] {
    return peerStatus(this.#peers, this.#refused, this.#synced);
  }

  #setOwn(): void {
    if (!this.#scope.own) return;
    if (this.#own) this.#desired.remove(this.#own);
    this.#own = this.#scope.own();
    this.#desired.add(this.#own);
  }

  /** Peers programmed, and refused by reason, per family, for the metrics. */
  #publishPeers(): void {
    for (const counts of peerCounts(this.#scope.families, this.#programmed, this.#refused)) publish('peers', counts);
  }

  #setPeer(key: string, lease: Lease, program: PeerProgram): KnownPeer {
    this.#deletePeer(key);
    const peer: KnownPeer = { lease, entries: keep(program.entries), families: program.families, since: this.#clock.now() };
    this.#peers.set(key, peer);
    this.#desired.add(peer.entries);
    this.#underlay.add(key, lease, peer.families);
    for (const f of peer.families) this.#programmed.set(f, (this.#programmed.get(f) ?? 0) + 1);
    return peer;
  }

  #deletePeer(key: string): void {
    const old = this.#peers.get(key);
    if (!old) return;
    this.#peers.delete(key);
    this.#desired.remove(old.entries);
    this.#underlay.remove(key, old.lease);
    for (const f of old.families) this.#programmed.set(f, (this.#programmed.get(f) ?? 0) - 1);
  }

  #program(key: string, lease: Lease): PeerProgram | undefined {
    const result = this.#claimed(key, lease, this.#scope.program(lease));
    if (result === null || result.refused === undefined) {
      this.#refused.delete(key);
      return result === null || isRefusal(result) ? undefined : result;
    }
    const reason = result.refused;
    const whole = isRefusal(result);
    const prev = this.#refused.get(key);
    if (prev?.reason !== reason) {
      if (whole) this.#log.warn({ subnet: formatSubnetPair(lease.subnet), publicIp: formatPublicIps(lease.attrs) }, `refusing lease: ${reason}`);
      else this.#log.warn({ subnet: formatSubnetPair(lease.subnet) }, `programming only part of a lease: ${reason}`);
    }
    const families = result.refusedFamilies ?? (whole ? this.#scope.families.map((family) => ({ family, code: (result as Refusal).code })) : []);
    this.#refused.set(key, { reason, lease, whole, families, since: prev?.reason === reason ? prev.since : this.#clock.now() });
    return whole ? undefined : result;
  }

  /** The program, or a refusal when it wants what an established peer (or the node) holds in another form. */
  #claimed(key: string, lease: Lease, result: PeerProgram | Refusal | null): PeerProgram | Refusal | null {
    this.#conflicted.delete(key);
    if (result === null || isRefusal(result)) return result;
    const underlay = this.#underlay.clash(key, lease, result.families);
    if (underlay) {
      this.#conflicted.add(key);
      const holder = this.#peers.get(underlay.holder)?.lease;
      const named = holder ? `the lease of ${formatSubnetPair(holder.subnet)} (${formatPublicIps(holder.attrs)})` : underlay.holder;
      const text = underlay.code === 'public_ip_in_lease_subnet'
        ? `its public IP ${formatIp(underlay.ip)} lies inside the subnet ${formatCidr(underlay.subnet)} of ${named}`
        : `its subnet ${formatCidr(underlay.subnet)} holds the public IP ${formatIp(underlay.ip)} of ${named}`;
      return { code: underlay.code, refused: text };
    }
    const clash = this.#desired.conflict(result.entries, this.#peers.get(key)?.entries);
    if (!clash) return result;
    this.#conflicted.add(key);
    const name = clash.kind.name;
    let holder = 'this node';
    for (const [k, peer] of this.#peers) {
      if (k !== key && wantsEntry(peer.entries, name, clash.theirs)) holder = `the lease of ${formatSubnetPair(peer.lease.subnet)} (${formatPublicIps(peer.lease.attrs)})`;
    }
    return { code: clash.kind.exclusive!.code, refused: `its ${clash.kind.exclusive!.describe(clash.entry)} is already claimed by ${holder}` };
  }

  /**
   * Adds to `held` (what #remove has just written as the desired state wants it) the entries of
   * changed programs that the kernel already holds as they want: a lease that changes its public
   * IP changes one FDB entry, and its neighbour and route are not written again (flanneld writes
   * all three). `before` has the programs held before the batch, which are in the kernel while no
   * write has failed since the last clean reconcile (#failedAtClean); what #remove left of them is
   * what the desired state wants, so an entry of the same key that matches is in place, unless
   * another program wants that key too (the kernel may hold that one's form).
   */
  #held(programs: readonly Written[], before: ReadonlyMap<string, KeptProgram | undefined>, held: Held): Held {
    if (this.#failedWrites !== this.#failedAtClean) return held;
    for (const w of programs) {
      const old = before.get(w.key);
      if (!old) continue;
      for (const kind of this.#kinds) {
        const had = entriesOfKind(old, kind.name);
        if (had.length === 0) continue;
        const want = this.#desired.of(kind);
        forEachOfKind(w.entries, kind.name, (e) => {
          const key = kind.key(e);
          if (want.find(key, (other) => other !== e)) return;
          if (had.some((h) => kind.key(h) === key && kind.matches(e, h))) heldOf(held, kind).add(e);
        });
      }
    }
    return held;
  }

  /**
   * Writes programs kind by kind, each kind's entries of every program together (so that they go
   * to the kernel in batches), but for those `held` already; a failure stops that program there
   * and takes its earlier kinds back out. The last kind has nothing after it, so a program's other
   * entries of it still go in.
   */
  async #write(programs: readonly Written[], signal: AbortSignal, held: Held): Promise<void> {
    let live = programs;
    for (const [i, kind] of this.#kinds.entries()) {
      if (signal.aborted || live.length === 0) return;
      const failed = new Set<Written>();
      const skip = held.get(kind);
      await inWindows(entriesOf(live, kind), ([w, entry]) =>
        skip?.has(entry) ? undefined : this.#try(kind, 'replace', w.subject, () => kind.put(entry)).then((ok) => void (ok || failed.add(w))),
      );
      if (failed.size === 0 || i === this.#kinds.length - 1) continue;
      for (const w of failed) {
        for (const earlier of this.#kinds.slice(0, i)) {
          // Not an entry another program wants too (its write of it stands).
          const wanted = this.#desired.of(earlier);
          for (const e of entriesOfKind(w.entries, earlier.name)) {
            if (!wanted.find(earlier.key(e), (other) => other !== e)) await this.#try(earlier, 'delete', w.subject, () => earlier.remove(e));
          }
        }
      }
      live = live.filter((w) => !failed.has(w));
    }
  }

  /**
   * Removes what no remaining program still wants, last kind first (two leases may share a next
   * hop or a VtepMAC); an entry that another program still wants in another form (the FDB entry
   * of a shared MAC, now pointing at the other peer) is written as that program wants it.
   */
  async #remove(programs: readonly Written[], put: Held): Promise<void> {
    if (programs.length === 0) return;
    for (const kind of [...this.#kinds].reverse()) {
      const want = this.#desired.of(kind);
      await inWindows(entriesOf(programs, kind), ([w, e]) => {
        const still = want.get(kind.key(e));
        if (!still) return this.#try(kind, 'delete', w.subject, () => kind.remove(e));
        return kind.matches(still, e) ? undefined : this.#try(kind, 'replace', w.subject, () => kind.put(still)).then((ok) => void (ok && heldOf(put, kind).add(still)));
      });
    }
  }

  #flush(): void {
    for (const kind of this.#kinds) kind.flush?.();
  }

  /**
   * One kernel write; a failure is logged and published, and makes the run loop retry later.
   * Not an async function: one promise a write fewer, of 15 000 at a start with 5000 peers.
   */
  #try(kind: EntryKind, write: 'replace' | 'delete', subject: string, op: () => Promise<void>): Promise<boolean> {
    const failed = (err: unknown): boolean => {
      this.#log.error({ err, subject, detail: errorMessage(err) }, `failed to ${write} ${kind.name}`);
      publish('kernel.write', { kind: kind.name, op: write, ok: false });
      this.#writeFailed = true;
      this.#failedWrites++;
      return false;
    };
    let pending: Promise<void>;
    try {
      pending = op();
    } catch (err) {
      return Promise.resolve(failed(err));
    }
    return pending.then(() => {
      publish('kernel.write', { kind: kind.name, op: write, ok: true });
      return true;
    }, failed);
  }
}

/** Registry creation order, leases without one last (a stable sort keeps their order). */
function byCreation(a: LeaseEvent, b: LeaseEvent): number {
  return (a.lease.created ?? Infinity) - (b.lease.created ?? Infinity) || 0;
}

/**
 * Entries the kernel holds as a changed program wants them, by kind: one object may be the entry
 * of two kinds (a vxlan peer's neighbour and FDB entry are one record), held in one, not the other.
 */
type Held = Map<EntryKind, Set<object>>;

function heldOf(held: Held, kind: EntryKind): Set<object> {
  let set = held.get(kind);
  if (!set) held.set(kind, (set = new Set()));
  return set;
}

/** A program as written or removed, with the lease it is for in log lines. */
interface Written {
  readonly key: string;
  readonly entries: KeptProgram;
  readonly subject: string;
}

const written = (key: string, peer: KnownPeer): Written => ({ key, entries: peer.entries, subject: formatSubnetPair(peer.lease.subnet) });

/** Every entry of one kind in these programs, with its program. */
function* entriesOf(programs: readonly Written[], kind: EntryKind): Generator<[Written, object]> {
  for (const w of programs) {
    const v = w.entries[kind.name];
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const entry of v as readonly object[]) yield [w, entry];
    else yield [w, v];
  }
}

/**
 * Kernel writes in flight at once. Writes made together go to the kernel in batches (the Netlink
 * adapter's rt-channel.ts); more in flight only hold an encoded message and a promise each, and
 * those that outlive a scavenge of the agent's 1 MB young generation go to the old space: with
 * 256 the dual-stack start with 1000 peers peaked 6.8 MB higher than with 64 (72.7 against 65.9
 * MB, its anonymous part 29.9 against 23.4), with 128 2.4 MB higher; 64 takes as long at 5000 peers
 * (docs/benchmarks.md, 2026-11-26).
 */
const WINDOW = 64;

/** Runs `op` on every item, at most WINDOW at once; `op` may return undefined for nothing to do. */
async function inWindows<T>(items: Iterable<T>, op: (item: T) => Promise<unknown> | undefined): Promise<void> {
  let window: Array<Promise<unknown>> = [];
  for (const item of items) {
    const p = op(item);
    if (!p) continue;
    window.push(p);
    if (window.length === WINDOW) {
      await Promise.all(window);
      window = [];
    }
  }
  await Promise.all(window);
}

/** fe80::/10. */
const isIpv6LinkLocal = (ip: IpAddr): boolean => ip.family === 6 && ip.value >> 118n === 0x3fan;
