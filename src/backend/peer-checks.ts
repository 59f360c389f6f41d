/**
 * Leases come from a shared registry that anyone with write access can fill: each one is checked
 * before it programs anything (flanneld trusts them all).
 */
import { type Cidr, containsIp, overlaps } from '../ip/cidr.js';
import { type IpAddr, formatIp, ipEquals } from '../ip/ip.js';
import type { Lease } from '../lease/lease.js';

export interface PeerContext {
  readonly network?: Cidr;
  readonly own?: Cidr;
  readonly ownPublicIp?: IpAddr;
}

/** Why an IPv4 peer lease must not be programmed, or undefined when it may. */
export function ipv4PeerProblem(lease: Lease, ctx: PeerContext): string | undefined {
  const subnet = lease.subnet.ipv4;
  const ip = lease.attrs.publicIp;
  if (!subnet) return 'it has no IPv4 subnet';
  if (ctx.network && !containsIp(ctx.network, subnet.ip)) return 'its subnet is outside the network';
  if (ctx.own && overlaps(subnet, ctx.own)) return "its subnet overlaps this node's own subnet";
  if (ip.value === 0n) return 'it has no public IP';
  if (ctx.network && containsIp(ctx.network, ip)) return `its public IP ${formatIp(ip)} lies inside the pod network`;
  if (ctx.ownPublicIp && ipEquals(ip, ctx.ownPublicIp)) return `its public IP ${formatIp(ip)} is this node's own`;
  if (ip.value >> 24n === 127n || ip.value >> 28n === 14n || ip.value === 0xffffffffn) return `its public IP ${formatIp(ip)} is not a unicast address`;
  return undefined;
}
