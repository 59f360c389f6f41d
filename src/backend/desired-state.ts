/**
 * The kernel entries that the accepted peers ask for, indexed the way the reconciler compares them
 * with the kernel: neighbours by device and IP, FDB entries by device and MAC, routes by
 * destination. Pure: no I/O.
 */
import { type Cidr, cidrEquals } from '../ip/cidr.js';
import { type Family, type IpAddr, formatIp, ipEquals } from '../ip/ip.js';
import type { FdbInfo, FdbSpec, NeighbourChange, NeighbourSpec, NetlinkChange, RouteInfo, RouteSpec } from '../netlink/netlink.js';

export interface PeerProgram {
  readonly neighbours: readonly NeighbourSpec[];
  readonly fdb: readonly FdbSpec[];
  readonly routes: readonly RouteSpec[];
  /** Userspace forwarding entries (udp): none of them is a kernel entry. */
  readonly tunnels?: readonly TunnelSpec[];
  /** Why a family of the lease was left out (a dual-stack lease may be half usable). */
  readonly refused?: string;
  /** The families left out, each with the code of its reason (for metrics). */
  readonly refusedFamilies?: readonly FamilyRefusal[];
}

/** Packets for `dst` go to `endpoint` in a datagram: the udp backend's forwarding table. */
export interface TunnelSpec {
  readonly dst: Cidr;
  readonly endpoint: IpAddr;
}

/** Why a lease, or one family of it, is not programmed: text for people, a code for metrics. */
export interface Refusal {
  readonly refused: string;
  /** e.g. `outside_network`, `not_unicast`, `bad_vtep_mac`. */
  readonly code: string;
  readonly refusedFamilies?: readonly FamilyRefusal[];
}

export interface FamilyRefusal {
  readonly family: Family;
  readonly code: string;
}

/** A device whose neighbours and FDB entries a backend manages entirely, e.g. `flannel.1`. */
export interface ManagedDevice {
  readonly index: number;
  readonly family: Family;
}

// Keys made with join, not template literals: join gives one flat string, a template literal a
// chain of concatenations that a Map keeps as three objects (about 60 bytes more per key).
export const routeKey = (r: RouteSpec): string => [formatIp(r.dst.ip), r.dst.prefix].join('/');
export const neighKey = (n: { index: number; ip: IpAddr }): string => [n.index, formatIp(n.ip)].join(' ');
export const fdbKey = (f: { index: number; mac: string }): string => [f.index, f.mac].join(' ');
const sameIp = (a: IpAddr | undefined, b: IpAddr | undefined): boolean => (a && b ? ipEquals(a, b) : a === b);
const RT_TABLE_MAIN = 254;

export function routeMatches(want: RouteSpec, have: RouteSpec): boolean {
  return (
    cidrEquals(want.dst, have.dst) &&
    sameIp(want.gateway, have.gateway) &&
    (want.index === undefined || want.index === have.index) &&
    Boolean(want.onlink) === Boolean(have.onlink) &&
    (want.type ?? 'unicast') === (have.type ?? 'unicast')
  );
}

export const neighbourMatches = (want: NeighbourSpec, have: NeighbourChange): boolean => have.mac === want.mac && have.permanent;
export const fdbMatches = (want: FdbSpec, have: Pick<FdbInfo, 'dst'>): boolean => sameIp(have.dst, want.dst);

/** What the reconciler needs to know about the backend to judge a notification. */
export interface ChangeScope {
  /** Whether a kernel route is one this backend manages. */
  ownsRoute(route: RouteInfo): boolean;
  /** Devices whose neighbours and FDB entries this backend manages entirely (one per family for vxlan). */
  devices(): readonly ManagedDevice[];
  /**
   * Links whose changes can undo this backend's entries unannounced (a link that goes down takes
   * its routes along without a route notification): its device and the external interface.
   */
  links(): readonly number[];
}

/**
 * Entries by key. Two peers may want an entry under one key (two leases with one VtepMAC): the
 * one added last counts, and removing it brings back the other. A key with one entry (nearly all
 * of them) holds it directly; only shared keys hold a list, which saves an array per entry.
 */
export class EntryIndex<T extends object> {
  readonly #byKey = new Map<string, T | Shared<T>>();
  readonly #key: (entry: T) => string;

  constructor(key: (entry: T) => string) {
    this.#key = key;
  }

  get size(): number {
    return this.#byKey.size;
  }

  get(key: string): T | undefined {
    const v = this.#byKey.get(key);
    return v instanceof Shared ? v.entries.at(-1) : v;
  }

  has(key: string): boolean {
    return this.#byKey.has(key);
  }

  *[Symbol.iterator](): IterableIterator<[string, T]> {
    for (const [key, v] of this.#byKey) yield [key, v instanceof Shared ? v.entries[v.entries.length - 1]! : v];
  }

  add(entry: T): void {
    const key = this.#key(entry);
    const v = this.#byKey.get(key);
    if (v === undefined) this.#byKey.set(key, entry);
    else if (v instanceof Shared) v.entries.push(entry);
    else this.#byKey.set(key, new Shared([v, entry]));
  }

  /** Removes this very entry (by identity). */
  remove(entry: T): void {
    const key = this.#key(entry);
    const v = this.#byKey.get(key);
    if (v === entry) {
      this.#byKey.delete(key);
      return;
    }
    if (!(v instanceof Shared)) return;
    const at = v.entries.lastIndexOf(entry);
    if (at < 0) return;
    v.entries.splice(at, 1);
    if (v.entries.length === 1) this.#byKey.set(key, v.entries[0]!);
  }
}

/** The entries of a key that several peers want, oldest first. */
class Shared<T> {
  readonly entries: T[];

  constructor(entries: T[]) {
    this.entries = entries;
  }
}

/** The union of the programs of all accepted peers, kept up to date as peers come and go. */
export class DesiredState {
  readonly neighbours = new EntryIndex<NeighbourSpec>(neighKey);
  readonly fdb = new EntryIndex<FdbSpec>(fdbKey);
  readonly routes = new EntryIndex<RouteSpec>(routeKey);

  add(program: PeerProgram): void {
    for (const n of program.neighbours) this.neighbours.add(n);
    for (const f of program.fdb) this.fdb.add(f);
    for (const r of program.routes) this.routes.add(r);
  }

  remove(program: PeerProgram): void {
    for (const n of program.neighbours) this.neighbours.remove(n);
    for (const f of program.fdb) this.fdb.remove(f);
    for (const r of program.routes) this.routes.remove(r);
  }

  /**
   * Whether a kernel notification may leave the kernel different from this state. The echo of
   * the reconciler's own writes is not: without this test, programming 1000 peers would be
   * followed by a second full pass over 3000 entries that changes nothing.
   */
  departs(change: NetlinkChange, scope: ChangeScope): boolean {
    switch (change.kind) {
      case 'unparsed':
        return true;
      case 'link':
      case 'addr':
        // Not every link: pods come and go on veth pairs all the time.
        return scope.links().includes(change.index);
      case 'route': {
        const have = change.entry;
        if (!have) return true;
        if (have.table !== RT_TABLE_MAIN) return false;
        const want = this.routes.get(routeKey(have));
        if (change.deleted) return want !== undefined && routeMatches(want, have);
        return want ? !routeMatches(want, have) : scope.ownsRoute(have);
      }
      case 'neigh': {
        if (!scope.devices().some((d) => d.index === change.index)) return false;
        const have = change.entry;
        if (!have) return true;
        const want = this.neighbours.get(neighKey(have));
        if (change.deleted) return want !== undefined;
        return want ? !neighbourMatches(want, have) : have.permanent;
      }
      case 'fdb': {
        if (!scope.devices().some((d) => d.index === change.index)) return false;
        const have = change.entry;
        if (!have) return true;
        const want = this.fdb.get(fdbKey(have));
        if (change.deleted) return want !== undefined && fdbMatches(want, have);
        return want ? !fdbMatches(want, have) : have.permanent && have.dst !== undefined;
      }
    }
  }
}
