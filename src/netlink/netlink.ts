/**
 * The kernel as weft sees it: links, addresses, routes, neighbours and bridge FDB entries, plus a
 * stream of change notifications. Backends depend on this port only; `rtnetlink.ts` implements it
 * over the `netlink` package.
 */
import type { Cidr } from '../ip/cidr.js';
import type { Family, IpAddr } from '../ip/ip.js';

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

export interface LinkInfo {
  readonly index: number;
  readonly name: string;
  /** `vxlan`, `bridge`, `veth`, ... ; undefined for plain devices. */
  readonly kind?: string;
  readonly mtu: number;
  readonly up: boolean;
  /** Lowercase `aa:bb:..`, when the link has one. */
  readonly mac?: string;
  readonly vxlan?: VxlanSpec;
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
}

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
  | { readonly kind: 'addr'; readonly index: number; readonly deleted: boolean }
  | { readonly kind: 'route'; readonly deleted: boolean; readonly entry?: RouteInfo }
  | { readonly kind: 'neigh'; readonly index: number; readonly deleted: boolean; readonly entry?: NeighbourChange }
  | { readonly kind: 'fdb'; readonly index: number; readonly deleted: boolean; readonly entry?: FdbInfo }
  /** A message of a subscribed kind that could not be read: anything may have changed. */
  | { readonly kind: 'unparsed'; readonly type: number };

/**
 * All methods act on the network namespace the process runs in. Mutations are idempotent where
 * the kernel allows (`replace*`); deletions of entries that are already gone resolve quietly.
 */
export interface Netlink {
  links(): Promise<LinkInfo[]>;
  linkByName(name: string): Promise<LinkInfo | undefined>;
  createVxlan(name: string, spec: VxlanSpec, options: { mac?: string; mtu?: number }): Promise<LinkInfo>;
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
  deleteRoute(route: RouteSpec): Promise<void>;
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

  /** Kernel changes to links, addresses, routes and neighbours, until `signal` aborts. */
  subscribe(signal: AbortSignal): AsyncIterable<NetlinkChange[]>;

  close(): void;
}
