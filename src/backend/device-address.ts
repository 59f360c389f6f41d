/**
 * A device of the backend carries this node's subnet address as a host address (/32 or /128),
 * and no other address of the pod network: what flannel gives its vxlan and TUN devices.
 */
import { type Cidr, containsIp } from '../ip/cidr.js';
import { type Family, familyBits, ipEquals } from '../ip/ip.js';
import type { Netlink } from '../netlink/netlink.js';

export async function ensureSubnetAddress(nl: Netlink, index: number, family: Family, subnet: Cidr, network: Cidr): Promise<void> {
  const bits = familyBits(family);
  let present = false;
  for (const a of await nl.addresses({ index, family })) {
    if (a.prefix === bits && ipEquals(a.ip, subnet.ip)) present = true;
    else if (containsIp(network, a.ip)) await nl.deleteAddress(index, a.ip, a.prefix);
  }
  if (!present) await nl.addAddress(index, subnet.ip, bits);
}

/** Whether the device has the subnet address (what a repair checks). */
export async function hasSubnetAddress(nl: Netlink, index: number, family: Family, subnet: Cidr): Promise<boolean> {
  const bits = familyBits(family);
  return (await nl.addresses({ index, family })).some((a) => a.prefix === bits && ipEquals(a.ip, subnet.ip));
}
