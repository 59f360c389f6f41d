/**
 * An in-memory kernel behind the Netlink port, for unit tests of decisions (the reconciler, the
 * backends): links, addresses, main-table routes, neighbours and FDB entries, with notifications
 * for every change, as the kernel sends them. A test changes it "by hand" through `kernel`
 * methods (which notify, like `ip route del`), and can make the next writes of one kind fail.
 * The real adapter is exercised against a real kernel in rtnetlink.netns.test.ts.
 */
import { AsyncQueue } from '../core/async-queue.js';
import { type Cidr, cidrEquals } from '../ip/cidr.js';
import { type Family, type IpAddr, formatIp, ipEquals } from '../ip/ip.js';
import {
  type AddressInfo, type FdbInfo, type FdbSpec, KernelError, type LinkInfo, type LinkSpec, type NeighbourInfo, type NeighbourSpec, type Netlink, type NetlinkChange,
  RTPROT_WEFT, type RouteInfo, type RouteSpec,
} from '../netlink/netlink.js';

type Op = 'replaceRoute' | 'replaceNeighbour' | 'replaceFdb' | 'deleteRoute' | 'deleteNeighbour' | 'deleteFdb' | 'createLink';

const routeId = (dst: Cidr): string => `${formatIp(dst.ip)}/${dst.prefix}`;
const neighId = (index: number, ip: IpAddr): string => `${index} ${formatIp(ip)}`;
const fdbId = (index: number, mac: string): string => `${index} ${mac}`;

export class FakeNetlink implements Netlink {
  readonly linkTable = new Map<number, LinkInfo>();
  readonly addrs: AddressInfo[] = [];
  readonly routeTable = new Map<string, RouteInfo>();
  readonly neighTable = new Map<string, NeighbourInfo>();
  readonly fdbTable = new Map<string, FdbInfo>();
  /** Every write the code under test made, in order, e.g. `replaceFdb 7 0e:..`. */
  readonly writes: string[] = [];
  readonly #failing = new Map<Op, number>();
  /** Each listener's queue and what it keeps (Netlink.subscribe's `keep`). */
  readonly #subscribers = new Map<AsyncQueue<NetlinkChange[]>, (change: NetlinkChange) => boolean>();
  #nextIndex = 10;

  constructor(links: ReadonlyArray<Omit<LinkInfo, 'up'> & { up?: boolean }> = [{ index: 2, name: 'eth0', mtu: 1500 }]) {
    for (const l of links) this.linkTable.set(l.index, { up: true, ...l });
  }

  /** The next `times` calls of `op` fail, as a kernel that refuses the request would. */
  failNext(op: Op, times = 1): void {
    this.#failing.set(op, times);
  }

  #maybeFail(op: Op): void {
    const left = this.#failing.get(op) ?? 0;
    if (left <= 0) return;
    this.#failing.set(op, left - 1);
    throw new KernelError(`fake ${op}`, 'EINVAL');
  }

  #notify(change: NetlinkChange): void {
    this.#deliver([change]);
  }

  #deliver(changes: NetlinkChange[]): void {
    for (const [q, keep] of this.#subscribers) {
      const kept = changes.filter(keep);
      if (kept.length > 0) q.push(kept);
    }
  }

  async links(): Promise<LinkInfo[]> {
    return [...this.linkTable.values()];
  }

  async linkByName(name: string): Promise<LinkInfo | undefined> {
    return [...this.linkTable.values()].find((l) => l.name === name);
  }

  /** Link kinds this kernel lacks (createLink fails with EOPNOTSUPP, as a kernel without the module). */
  readonly missingKinds = new Set<LinkSpec['kind']>();

  async createLink(name: string, spec: LinkSpec, options: { mac?: string; mtu?: number }): Promise<LinkInfo> {
    this.#maybeFail('createLink');
    if (this.missingKinds.has(spec.kind)) throw new KernelError(`create ${spec.kind} link ${name}`, 'EOPNOTSUPP');
    if (await this.linkByName(name)) throw new KernelError(`create ${spec.kind} link ${name}`, 'EEXIST');
    const link: LinkInfo = { index: this.#nextIndex++, name, mtu: options.mtu ?? 1450, up: false, mac: options.mac ?? '0e:00:00:00:00:01', details: spec };
    this.linkTable.set(link.index, link);
    this.writes.push(`createLink ${spec.kind} ${name}`);
    this.#notify({ kind: 'link', index: link.index, deleted: false, name });
    return link;
  }

  async deleteLink(index: number): Promise<void> {
    this.kernel.deleteLink(index);
  }

  /** Devices told to refuse router advertisements. */
  readonly noRouterAdvertisements = new Set<string>();

  async refuseRouterAdvertisements(name: string): Promise<boolean> {
    this.noRouterAdvertisements.add(name);
    return true;
  }

  /** Devices told to accept packets with a local source address. */
  readonly acceptLocal = new Set<string>();

  async acceptLocalSource(name: string): Promise<boolean> {
    this.acceptLocal.add(name);
    return true;
  }

  async setLink(index: number, change: { up?: boolean; mtu?: number }): Promise<void> {
    const link = this.linkTable.get(index);
    if (!link) throw new KernelError(`set link ${index}`, 'ENODEV');
    this.linkTable.set(index, { ...link, ...(change.up !== undefined ? { up: change.up } : {}), ...(change.mtu !== undefined ? { mtu: change.mtu } : {}) });
    this.#notify({ kind: 'link', index, deleted: false });
  }

  async addresses(options: { index?: number; family?: Family } = {}): Promise<AddressInfo[]> {
    return this.addrs.filter((a) => (options.index === undefined || a.index === options.index) && (options.family === undefined || a.ip.family === options.family));
  }

  async addAddress(index: number, ip: IpAddr, prefix: number): Promise<void> {
    if (this.addrs.some((a) => a.index === index && ipEquals(a.ip, ip))) return;
    this.addrs.push({ index, ip, prefix, scope: 0, permanent: true, deprecated: false, temporary: false });
    this.#notify({ kind: 'addr', index, deleted: false, ip });
  }

  async deleteAddress(index: number, ip: IpAddr): Promise<void> {
    const at = this.addrs.findIndex((a) => a.index === index && ipEquals(a.ip, ip));
    if (at >= 0) this.addrs.splice(at, 1);
    this.#notify({ kind: 'addr', index, deleted: true, ip });
  }

  async routes(family: Family): Promise<RouteInfo[]> {
    return [...this.routeTable.values()].filter((r) => r.dst.ip.family === family);
  }

  async replaceRoute(route: RouteSpec): Promise<void> {
    this.#maybeFail('replaceRoute');
    const entry: RouteInfo = { ...route, table: 254, protocol: RTPROT_WEFT, scope: 0 };
    this.routeTable.set(routeId(route.dst), entry);
    this.writes.push(`replaceRoute ${routeId(route.dst)}`);
    this.#notify({ kind: 'route', deleted: false, entry });
  }

  async addRoute(route: RouteSpec): Promise<void> {
    if (this.routeTable.has(routeId(route.dst))) throw new KernelError(`add route ${routeId(route.dst)}`, 'EEXIST');
    await this.replaceRoute(route);
  }

  async deleteRoute(route: RouteSpec): Promise<void> {
    this.#maybeFail('deleteRoute');
    this.writes.push(`deleteRoute ${routeId(route.dst)}`);
    this.kernel.deleteRoute(route.dst);
  }

  /** Whether routes may name nexthop objects (they are kept with the route, as its `nexthop`). */
  nexthops = false;

  async supportsNexthops(): Promise<boolean> {
    return this.nexthops;
  }

  async routeGet(ip: IpAddr): Promise<RouteInfo | undefined> {
    return [...this.routeTable.values()].find((r) => r.dst.prefix === 0 && r.dst.ip.family === ip.family);
  }

  async neighbours(index: number, family: Family): Promise<NeighbourInfo[]> {
    return [...this.neighTable.values()].filter((n) => n.index === index && n.ip.family === family);
  }

  async replaceNeighbour(entry: NeighbourSpec): Promise<void> {
    this.#maybeFail('replaceNeighbour');
    // Only a neighbour's own members, as the kernel keeps them (vxlan hands one record that is also the FDB entry).
    const info: NeighbourInfo = { index: entry.index, ip: entry.ip, mac: entry.mac, permanent: true };
    this.neighTable.set(neighId(entry.index, entry.ip), info);
    this.writes.push(`replaceNeighbour ${neighId(entry.index, entry.ip)}`);
    this.#notify({ kind: 'neigh', index: entry.index, deleted: false, entry: info });
  }

  async deleteNeighbour(entry: { index: number; ip: IpAddr }): Promise<void> {
    this.#maybeFail('deleteNeighbour');
    this.writes.push(`deleteNeighbour ${neighId(entry.index, entry.ip)}`);
    this.kernel.deleteNeighbour(entry.index, entry.ip);
  }

  async fdb(index: number): Promise<FdbInfo[]> {
    return [...this.fdbTable.values()].filter((f) => f.index === index);
  }

  async replaceFdb(entry: FdbSpec): Promise<void> {
    this.#maybeFail('replaceFdb');
    const info: FdbInfo = { index: entry.index, mac: entry.mac, dst: entry.dst, permanent: true, self: true };
    this.fdbTable.set(fdbId(entry.index, entry.mac), info);
    this.writes.push(`replaceFdb ${fdbId(entry.index, entry.mac)}`);
    this.#notify({ kind: 'fdb', index: entry.index, deleted: false, entry: info });
  }

  async deleteFdb(entry: FdbSpec): Promise<void> {
    this.#maybeFail('deleteFdb');
    this.writes.push(`deleteFdb ${fdbId(entry.index, entry.mac)}`);
    this.kernel.deleteFdb(entry.index, entry.mac);
  }

  async *subscribe(signal: AbortSignal, keep: (change: NetlinkChange) => boolean = () => true): AsyncIterable<NetlinkChange[]> {
    const queue = new AsyncQueue<NetlinkChange[]>();
    this.#subscribers.set(queue, keep);
    try {
      for (;;) yield await queue.next(signal);
    } catch (err) {
      if (!signal.aborted) throw err;
    } finally {
      this.#subscribers.delete(queue);
    }
  }

  close(): void {}

  /** Changes made "by hand" (another program, an operator): they notify like the kernel. */
  readonly kernel = {
    deleteRoute: (dst: Cidr): void => {
      const entry = this.routeTable.get(routeId(dst));
      if (!entry || !cidrEquals(entry.dst, dst)) return;
      this.routeTable.delete(routeId(dst));
      this.#notify({ kind: 'route', deleted: true, entry });
    },
    addRoute: (route: RouteSpec): void => {
      const entry: RouteInfo = { ...route, table: 254, protocol: 3, scope: 0 };
      this.routeTable.set(routeId(route.dst), entry);
      this.#notify({ kind: 'route', deleted: false, entry });
    },
    /** A neighbour the kernel learnt or someone added: permanent or not. */
    addNeighbour: (entry: NeighbourInfo): void => {
      this.neighTable.set(neighId(entry.index, entry.ip), entry);
      this.#notify({ kind: 'neigh', index: entry.index, deleted: false, entry });
    },
    /** An FDB entry the kernel learnt or someone added: with a destination or not, permanent or not. */
    addFdb: (entry: FdbInfo): void => {
      this.fdbTable.set(fdbId(entry.index, entry.mac), entry);
      this.#notify({ kind: 'fdb', index: entry.index, deleted: false, entry });
    },
    deleteNeighbour: (index: number, ip: IpAddr): void => {
      const entry = this.neighTable.get(neighId(index, ip));
      if (!entry) return;
      this.neighTable.delete(neighId(index, ip));
      this.#notify({ kind: 'neigh', index, deleted: true, entry: { index, ip, permanent: entry.permanent } });
    },
    deleteFdb: (index: number, mac: string): void => {
      const entry = this.fdbTable.get(fdbId(index, mac));
      if (!entry) return;
      this.fdbTable.delete(fdbId(index, mac));
      this.#notify({ kind: 'fdb', index, deleted: true, entry });
    },
    deleteLink: (index: number): void => {
      if (!this.linkTable.delete(index)) return;
      for (const [k, r] of this.routeTable) if (r.index === index) this.routeTable.delete(k);
      for (const [k, n] of this.neighTable) if (n.index === index) this.neighTable.delete(k);
      for (const [k, f] of this.fdbTable) if (f.index === index) this.fdbTable.delete(k);
      for (let i = this.addrs.length - 1; i >= 0; i--) if (this.addrs[i]!.index === index) this.addrs.splice(i, 1);
      this.#notify({ kind: 'link', index, deleted: true });
    },
    /** A notification the adapter could not read. */
    garbled: (): void => this.#notify({ kind: 'unparsed', type: 24 }),
    /** The notification socket's buffer overflowed: notifications were dropped. */
    overflowed: (): void => this.#notify({ kind: 'overflow', errno: 'ENOBUFS' }),
    /** Several notifications in one batch, as the kernel sends a burst; nothing changes. */
    notifyBatch: (changes: NetlinkChange[]): void => this.#deliver(changes),
  };
}
