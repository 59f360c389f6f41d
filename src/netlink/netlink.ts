/**
 * The kernel as weft sees it: links, addresses, routes, neighbours and bridge FDB entries, plus a
 * stream of change notifications. Backends depend on this port only; `rtnetlink.ts` implements it
 * over the `netlink` package.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { Cidr } from '../ip/cidr.js';
import type { Family, IpAddr } from '../ip/ip.js';

/** A kernel request refused or left unanswered: WEFT_ERR_KERNEL, with the kernel's errno name. */
export class KernelError extends WeftError {
  /** `EEXIST`, `ENODEV`, `EOPNOTSUPP`, ...; `ETIMEDOUT` when no answer came. */
  readonly errno: string;

  constructor(what: string, errno: string, options?: { cause?: unknown }) {
    super(ErrorCodes.KERNEL, `${what}: ${errno}`, options);
    this.name = 'KernelError';
    this.errno = errno;
  }
}

/** The errno name of a KernelError (or of any error carrying one), else undefined. */
export function errnoOf(err: unknown): string | undefined {
  const errno = (err as { errno?: unknown } | null)?.errno;
  return typeof errno === 'string' ? errno : undefined;
}

export interface VxlanSpec {
  readonly vni: number;
  /** Underlay device index (`dev`). */
  readonly underlay?: number;
  readonly local?: IpAddr;
  /** UDP destination port; 0 keeps the kernel default (8472). */
  readonly port: number;
  readonly learning: boolean;
  readonly gbp: boolean;
}

/** A link weft makes: its kind and that kind's settings. A new kind is one more member. */
export type LinkSpec =
  | { readonly kind: 'vxlan'; readonly vxlan: VxlanSpec }
  /** Configured afterwards over generic netlink (its own port), not rtnetlink. */
  | { readonly kind: 'wireguard' };

/**
 * What the kernel says a link is (IFLA_INFO_KIND) and, for the kinds weft reads, its settings;
 * `other` names any kind weft has no use for (`bridge`, `veth`, ...).
 */
export type LinkDetails =
  | { readonly kind: 'vxlan'; readonly vxlan: VxlanSpec }
  | { readonly kind: 'wireguard' }
  | { readonly kind: 'tun' }
  | { readonly kind: 'other'; readonly name: string };

export interface LinkInfo {
  readonly index: number;
  readonly name: string;
  readonly mtu: number;
  readonly up: boolean;
  /** Lowercase `aa:bb:..`, when the link has one. */
  readonly mac?: string;
  /** Absent for devices without a kind (a physical NIC, loopback). */
  readonly details?: LinkDetails;
}

/** The kernel's name for the link's kind (`vxlan`, `tun`, `bridge`, ...), if it has one. */
export function linkKind(link: Pick<LinkInfo, 'details'>): string | undefined {
  const d = link.details;
  return d === undefined ? undefined : d.kind === 'other' ? d.name : d.kind;
}

export interface AddressInfo {
  readonly index: number;
  readonly ip: IpAddr;
  readonly prefix: number;
  /** RT_SCOPE_*: 0 universe (global), 253 link, 254 host. */
  readonly scope: number;
  readonly permanent: boolean;
  readonly deprecated: boolean;
  readonly temporary: boolean;
}

export interface RouteSpec {
  readonly dst: Cidr;
  readonly gateway?: IpAddr;
  /** Output device index. */
  readonly index?: number;
  readonly onlink?: boolean;
  readonly type?: 'unicast' | 'blackhole';
  /**
   * Through the nexthop object of this id (Linux 5.3 on), which holds `gateway`, `index` and
   * `onlink`: written before the route, and removed with it. The kernel looks up a plain route's
   * gateway and device in one hash chain for every route through one device, so that the 5000th
   * flannel route walks 4999 entries; a route naming a nexthop object is hashed by the object's id
   * (docs/benchmarks.md). Listed routes carry the id they name.
   */
  readonly nexthop?: number;
}

/**
 * The protocol number of the routes weft writes (iproute2 shows `proto 87`): what marks a route as
 * weft's, so that a backend owns what it wrote and leaves the operator's routes alone, static, BGP
 * or DHCP ones into the same network included (flanneld writes `boot`, as `ip route add` does).
 */
export const RTPROT_WEFT = 87;

/** weft's nexthop objects carry this in the top byte of their id (nexthopIdOf). */
const NEXTHOP_TAG = 0xf1;

/**
 * The id of the nexthop object for a route into `subnet`: 0xf1 in the top byte and the low 24 bits
 * of the subnet's address, so that each subnet of a cluster network of /8 or smaller has its own,
 * the same on every node and every start, apart from the low ids other programs number theirs
 * from (FRR's zebra counts from 1). Undefined for IPv6 (the kernel keeps an IPv6 route's gateway
 * in the route itself, so it has no chain to walk) and for a wider network.
 */
export function nexthopIdOf(subnet: Cidr, network: Cidr): number | undefined {
  if (subnet.ip.family !== 4 || network.prefix < 8) return undefined;
  return NEXTHOP_TAG * 2 ** 24 + Number(subnet.ip.value & 0xff_ffffn);
}

/** Whether `id` (a listed route's, say) is in the range of weft's nexthop objects. */
export const isWeftNexthop = (id: number | undefined): id is number => id !== undefined && Math.floor(id / 2 ** 24) === NEXTHOP_TAG;

export interface RouteInfo extends RouteSpec {
  readonly table: number;
  readonly protocol: number;
  readonly scope: number;
  readonly prefsrc?: IpAddr;
}

export interface NeighbourSpec {
  readonly index: number;
  readonly ip: IpAddr;
  readonly mac: string;
}

export interface NeighbourInfo extends NeighbourSpec {
  readonly permanent: boolean;
}

/** A neighbour notification's entry: the kernel leaves out the MAC when it deletes one. */
export interface NeighbourChange extends Omit<NeighbourInfo, 'mac'> {
  readonly mac?: string;
}

export interface FdbSpec {
  readonly index: number;
  readonly mac: string;
  readonly dst: IpAddr;
}

export interface FdbInfo {
  readonly index: number;
  readonly mac: string;
  readonly dst?: IpAddr;
  readonly permanent: boolean;
  readonly self: boolean;
}

/**
 * One kernel notification. Routes, neighbours and FDB entries carry the entry, so a consumer can
 * tell the echo of its own write from drift; `entry` is absent when the message did not parse,
 * which still means that something changed.
 */
export type NetlinkChange =
  | { readonly kind: 'link'; readonly index: number; readonly deleted: boolean; readonly name?: string }
  | { readonly kind: 'addr'; readonly index: number; readonly deleted: boolean; readonly ip?: IpAddr }
  | { readonly kind: 'route'; readonly deleted: boolean; readonly entry?: RouteInfo }
  | { readonly kind: 'neigh'; readonly index: number; readonly deleted: boolean; readonly entry?: NeighbourChange }
  | { readonly kind: 'fdb'; readonly index: number; readonly deleted: boolean; readonly entry?: FdbInfo }
  /** A message of a subscribed kind that could not be read: anything may have changed. */
  | { readonly kind: 'unparsed'; readonly type: number }
  /** Notifications were lost (the socket's buffer overflowed, ENOBUFS): anything may have changed. */
  | { readonly kind: 'overflow'; readonly errno: string };

/**
 * All methods act on the network namespace the process runs in. Mutations are idempotent where
 * the kernel allows (`replace*`); deletions of entries that are already gone resolve quietly. A
 * refusal or a request the kernel leaves unanswered (10 s) rejects with WEFT_ERR_KERNEL, whose
 * `errno` names the kernel's reason (`EEXIST`, `ENODEV`, `ETIMEDOUT`, ...).
 */
export interface Netlink {
  links(): Promise<LinkInfo[]>;
  linkByName(name: string): Promise<LinkInfo | undefined>;
  /**
   * Makes the link (never replaces one: EEXIST when the name is taken) and returns it as the
   * kernel then lists it. WEFT_ERR_KERNEL with `errno` EOPNOTSUPP when the kernel lacks the kind.
   */
  createLink(name: string, spec: LinkSpec, options: { mac?: string; mtu?: number }): Promise<LinkInfo>;
  deleteLink(index: number): Promise<void>;
  setLink(index: number, change: { up?: boolean; mtu?: number }): Promise<void>;
  /**
   * `net.ipv6.conf.<name>.accept_ra = 0`: no router advertisement may give the device addresses
   * or routes (flannel sets it on its vxlan devices). A sysctl rather than a netlink message, but
   * a property of the link all the same. False when the sysctl cannot be written (a container's
   * read-only /proc/sys): the caller says so, and goes on.
   */
  refuseRouterAdvertisements(name: string): Promise<boolean>;
  /**
   * `net.ipv4.conf.<name>.accept_local = 1`: packets from the device may carry one of this node's
   * own addresses as source (the udp backend's ICMP errors come from its TUN address, as
   * flannel's). False when the sysctl cannot be written, as above.
   */
  acceptLocalSource(name: string): Promise<boolean>;

  addresses(options?: { index?: number; family?: Family }): Promise<AddressInfo[]>;
  addAddress(index: number, ip: IpAddr, prefix: number): Promise<void>;
  deleteAddress(index: number, ip: IpAddr, prefix: number): Promise<void>;

  /** Routes of the main table. */
  routes(family: Family): Promise<RouteInfo[]>;
  replaceRoute(route: RouteSpec): Promise<void>;
  /** Adds the route only where none has its destination: EEXIST (WEFT_ERR_KERNEL) otherwise, and nothing is replaced. */
  addRoute(route: RouteSpec): Promise<void>;
  deleteRoute(route: RouteSpec): Promise<void>;
  /** Whether the kernel has nexthop objects (Linux 5.3 on), so that a route may name one (RouteSpec.nexthop). */
  supportsNexthops(): Promise<boolean>;
  /** The route the kernel would use to reach `ip` (`ip route get`). */
  routeGet(ip: IpAddr): Promise<RouteInfo | undefined>;

  neighbours(index: number, family: Family): Promise<NeighbourInfo[]>;
  /** A PERMANENT neighbour entry. */
  replaceNeighbour(entry: NeighbourSpec): Promise<void>;
  deleteNeighbour(entry: { index: number; ip: IpAddr }): Promise<void>;

  fdb(index: number): Promise<FdbInfo[]>;
  /** A PERMANENT `self` FDB entry with a remote destination (vxlan). */
  replaceFdb(entry: FdbSpec): Promise<void>;
  deleteFdb(entry: FdbSpec): Promise<void>;

  /**
   * Kernel changes to links, addresses, routes and neighbours, until `signal` aborts. The echo of
   * the adapter's own writes may be left out (rtnetlink.ts leaves out its route and neighbour
   * writes'); a listener must still tell any it gets from drift. `keep`, when given, is asked
   * about each change as it is read, and only those it keeps are queued (no batch is empty): the
   * echo of thousands of writes is then let go at once instead of waiting in the queue (and in
   * memory) for the listener's turn.
   */
  subscribe(signal: AbortSignal, keep?: (change: NetlinkChange) => boolean): AsyncIterable<NetlinkChange[]>;

  close(): void;
}
