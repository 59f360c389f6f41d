/**
 * The lease model shared by every registry and backend: a node's subnet(s) plus the attributes
 * it publishes for its peers. The subnet lives only in the registry key, never in the value.
 */
import { type Cidr, cidrEquals, formatCidr } from '../ip/cidr.js';
import { type Family, type IpAddr, formatIp, ipEquals } from '../ip/ip.js';

/** What a node publishes about itself (flannel's LeaseAttrs, spec §2.3). */
export interface LeaseAttrs {
  /**
   * IPv4 address peers send to; absent when the node has none (an IPv6-only node). flannel's
   * wire forms write `0.0.0.0` for that: the codecs translate, nothing else sees the sentinel.
   */
  readonly publicIp?: IpAddr;
  readonly publicIpv6?: IpAddr;
  /** Absent for udp and alloc, which never set it. */
  readonly backendType?: string;
  /** Backend data as compact JSON text, passed through untouched. */
  readonly backendData?: string;
  readonly backendV6Data?: string;
}

/** A node's subnets: IPv4, IPv6 or both. */
export interface SubnetPair {
  readonly ipv4?: Cidr;
  readonly ipv6?: Cidr;
}

export interface Lease {
  readonly subnet: SubnetPair;
  readonly attrs: LeaseAttrs;
  /** When the registry drops it unless renewed (ms since the epoch); absent when it never expires or is not this process's to know. */
  readonly expiresAt?: number;
  /**
   * Where it stands in the registry's order of creation (etcd: the key's create revision), so
   * that of two leases claiming one thing the established one is kept. Absent where the registry
   * has no such order; comparable only within one registry.
   */
  readonly created?: number;
}

/**
 * Peer lease changes, in registry order. `removed` carries the last attributes that were seen.
 * `key`, where the source has it, is the lease's subnet key (formatSubnetKey) as the source keeps
 * it: whoever keeps the peer by that key holds the same string, not a second copy (32 bytes a
 * peer, docs/benchmarks.md). A lease that changes comes with a new string, which the source does
 * not keep (a Map keeps the key it was first given): that peer then costs the second copy again.
 */
export type LeaseEvent = { readonly type: 'added' | 'removed'; readonly lease: Lease; readonly key?: string };

export function subnetPairEquals(a: SubnetPair, b: SubnetPair): boolean {
  const same = (x: Cidr | undefined, y: Cidr | undefined): boolean => (x && y ? cidrEquals(x, y) : x === y);
  return same(a.ipv4, b.ipv4) && same(a.ipv6, b.ipv6);
}

/** Human text for logs, e.g. `198.18.3.0/24` or `198.18.3.0/24,fc00:0:0:3::/64`. */
export function formatSubnetPair(pair: SubnetPair): string {
  return [pair.ipv4, pair.ipv6].filter((c): c is Cidr => c !== undefined).map(formatCidr).join(',');
}

export function leaseAttrsEqual(a: LeaseAttrs, b: LeaseAttrs): boolean {
  const sameIp = (x: IpAddr | undefined, y: IpAddr | undefined): boolean => (x && y ? ipEquals(x, y) : x === y);
  return (
    sameIp(a.publicIp, b.publicIp) &&
    sameIp(a.publicIpv6, b.publicIpv6) &&
    a.backendType === b.backendType &&
    a.backendData === b.backendData &&
    a.backendV6Data === b.backendV6Data
  );
}

/**
 * One family's side of a lease, so that code written once serves both: the subnet, the public
 * address and the backend data (`BackendData` for IPv4, `BackendV6Data` for IPv6).
 */
export function subnetOf(pair: SubnetPair, family: Family): Cidr | undefined {
  return family === 4 ? pair.ipv4 : pair.ipv6;
}

/** The public address of that family, if the lease has one. */
export function publicIpOf(attrs: LeaseAttrs, family: Family): IpAddr | undefined {
  return family === 4 ? attrs.publicIp : attrs.publicIpv6;
}

/** The lease's public addresses for people: `203.0.113.2`, `2001:db8:113::2` or both. */
export function formatPublicIps(attrs: LeaseAttrs): string {
  return [attrs.publicIp, attrs.publicIpv6].filter((ip): ip is IpAddr => ip !== undefined).map(formatIp).join(',') || 'none';
}

export function backendDataOf(attrs: LeaseAttrs, family: Family): string | undefined {
  return family === 4 ? attrs.backendData : attrs.backendV6Data;
}
