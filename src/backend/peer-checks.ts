/**
 * Leases come from a shared registry that anyone with write access can fill: each one is checked,
 * family by family, before it programs anything (flanneld trusts them all).
 */
import { containsIp, overlaps } from '../ip/cidr.js';
import { type IpAddr, formatIp, ipEquals } from '../ip/ip.js';
import { type Lease, publicIpOf, subnetOf } from '../lease/lease.js';
import type { Refusal } from './desired-state.js';
import { type FamilyPlane, familyName } from './family-plane.js';

/** Why the lease's side of `plane`'s family must not be programmed, or undefined when it may. */
export function peerProblem(lease: Lease, plane: FamilyPlane): Refusal | undefined {
  const f = plane.family;
  const subnet = subnetOf(lease.subnet, f);
  const ip = publicIpOf(lease.attrs, f);
  const v = f === 4 ? '' : 'IPv6 ';
  const no = (code: string, refused: string): Refusal => ({ code, refused });
  if (!subnet) return no('no_subnet', `it has no ${familyName(f)} subnet`);
  if (!containsIp(plane.network, subnet.ip)) return no('outside_network', `its ${v}subnet is outside the ${v}network`);
  if (plane.subnet && overlaps(subnet, plane.subnet)) return no('overlaps_own', `its ${v}subnet overlaps this node's own`);
  if (!ip) return no('no_public_ip', `it has no public ${familyName(f)} address`);
  if (ip.family !== f) return no('wrong_family', `its public ${familyName(f)} address ${formatIp(ip)} is of the other family`);
  if (containsIp(plane.network, ip)) return no('public_ip_in_pod_network', `its public IP ${formatIp(ip)} lies inside the pod network`);
  if (ipEquals(ip, plane.publicIp)) return no('own_public_ip', `its public IP ${formatIp(ip)} is this node's own`);
  if (!isUnicast(ip)) return no('not_unicast', `its public IP ${formatIp(ip)} is not a unicast address`);
  return undefined;
}

/**
 * Addresses a tunnel or a next hop can point at: not unspecified, loopback, multicast or
 * broadcast; for IPv6 not link-local either (it would need a scope the lease cannot carry).
 */
function isUnicast(ip: IpAddr): boolean {
  const v = ip.value;
  if (ip.family === 4) return v !== 0n && v >> 24n !== 127n && v >> 28n !== 14n && v !== 0xffffffffn;
  return v > 1n && v >> 120n !== 0xffn && v >> 118n !== 0x3fan;
}
