/**
 * The one check of untrusted peer leases. Leases come from a shared registry that anyone with
 * write access can fill (etcd keys, Node annotations), so each one is checked, family by family,
 * before it programs anything (flanneld trusts them all). Both registries only decode; every rule
 * about what a lease may hold lives here, and every refusal carries the code that `/metrics`
 * counts (`weft_peers{state="refused",reason=...}`) and `weft status` shows. Pure.
 */
import { containsIp, formatCidr, overlaps } from '../ip/cidr.js';
import { type IpAddr, formatIp, ipEquals } from '../ip/ip.js';
import { type Lease, backendDataOf, publicIpOf, subnetOf } from '../lease/lease.js';
import { type FamilyPlane, familyName } from './family-plane.js';

/** Why a lease, or one family of it, is not programmed: text for people, a code for metrics. */
export interface Refusal {
  readonly refused: string;
  /** e.g. `outside_network`, `not_unicast`, `bad_vtep_mac`. */
  readonly code: string;
  readonly refusedFamilies?: readonly FamilyRefusal[];
}

export interface FamilyRefusal {
  readonly family: FamilyPlane['family'];
  readonly code: string;
}

/** Why the lease's side of `plane`'s family must not be programmed, or undefined when it may. */
export function peerProblem(lease: Lease, plane: FamilyPlane): Refusal | undefined {
  const f = plane.family;
  const subnet = subnetOf(lease.subnet, f);
  const ip = publicIpOf(lease.attrs, f);
  const v = f === 4 ? '' : 'IPv6 ';
  const no = (code: string, refused: string): Refusal => ({ code, refused });
  if (!subnet) return no('no_subnet', `it has no ${familyName(f)} subnet`);
  // Leases outside the network, or of another length than SubnetLen, are programmed as flanneld
  // programs them (a SubnetLen change under way, kube podCIDRs outside Network); only a subnet as
  // large as the network, which would take every pod's route, is refused.
  if (subnet.prefix <= plane.network.prefix) {
    return overlaps(subnet, plane.network) ? no('covers_network', `its ${v}subnet ${formatCidr(subnet)} covers the whole ${v}network`) : no('larger_than_network', `its ${v}subnet ${formatCidr(subnet)} is no smaller than the ${v}network ${formatCidr(plane.network)}`);
  }
  if (plane.subnet && overlaps(subnet, plane.subnet)) return no('overlaps_own', `its ${v}subnet overlaps this node's own`);
  if (!ip) return no('no_public_ip', `it has no public ${familyName(f)} address`);
  if (ip.family !== f) return no('wrong_family', `its public ${familyName(f)} address ${formatIp(ip)} is of the other family`);
  // Node addresses may lie inside Network (a 10/8 Network carved with SubnetMin/SubnetMax); what
  // breaks is an underlay address inside a subnet: packets for it would enter the overlay.
  if (containsIp(subnet, plane.publicIp)) return no('covers_own_public_ip', `its ${v}subnet ${formatCidr(subnet)} holds this node's public IP ${formatIp(plane.publicIp)}`);
  if (plane.subnet && containsIp(plane.subnet, ip)) return no('public_ip_in_own_subnet', `its public IP ${formatIp(ip)} lies inside this node's subnet ${formatCidr(plane.subnet)}`);
  if (containsIp(subnet, ip)) return no('public_ip_in_its_subnet', `its public IP ${formatIp(ip)} lies inside its own subnet ${formatCidr(subnet)}`);
  if (ipEquals(ip, plane.publicIp)) return no('own_public_ip', `its public IP ${formatIp(ip)} is this node's own`);
  if (!isUnicast(ip)) return no('not_unicast', `its public IP ${formatIp(ip)} is not a unicast address`);
  const data = backendDataOf(lease.attrs, f);
  if (data !== undefined && !isJson(data)) return no('bad_backend_data', `its ${f === 4 ? 'BackendData' : 'BackendV6Data'} is not JSON: ${data.slice(0, 80)}`);
  return undefined;
}

/**
 * Addresses a tunnel or a next hop can point at: not unspecified, loopback, multicast or
 * broadcast; for IPv6 not link-local either (it would need a scope the lease cannot carry).
 */
export function isUnicast(ip: IpAddr): boolean {
  const v = ip.value;
  if (ip.family === 4) return v !== 0n && v >> 24n !== 127n && v >> 28n !== 14n && v !== 0xffffffffn;
  return v > 1n && v >> 120n !== 0xffn && v >> 118n !== 0x3fan;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
