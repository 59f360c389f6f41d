/**
 * The lease model shared by every registry and backend: a node's subnet(s) plus the attributes
 * it publishes for its peers. The subnet lives only in the registry key, never in the value.
 */
import { type Cidr, cidrEquals, formatCidr } from '../ip/cidr.js';
import { type IpAddr, ipEquals } from '../ip/ip.js';

/** What a node publishes about itself (flannel's LeaseAttrs, spec §2.3). */
export interface LeaseAttrs {
  /** IPv4 address peers send to; `0.0.0.0` when the node has none. */
  readonly publicIp: IpAddr;
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
}

/** Peer lease changes, in registry order. `removed` carries the last attributes that were seen. */
export type LeaseEvent = { readonly type: 'added'; readonly lease: Lease } | { readonly type: 'removed'; readonly lease: Lease };

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
    ipEquals(a.publicIp, b.publicIp) &&
    sameIp(a.publicIpv6, b.publicIpv6) &&
    a.backendType === b.backendType &&
    a.backendData === b.backendData &&
    a.backendV6Data === b.backendV6Data
  );
}
