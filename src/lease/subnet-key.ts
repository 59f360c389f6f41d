/**
 * Registry key segments for leases (spec §2.2): `198.18.3.0-24`, `198.18.3.0-24&fc00:0:0:3::-64`,
 * and `0.0.0.0-0&fc00:0:0:3::-64` for IPv6 only. IPv6 text must be Go's canonical form, since
 * other agents compare keys as strings.
 */
import { type Cidr, tryParseCidr } from '../ip/cidr.js';
import { formatIp, tryParseIp } from '../ip/ip.js';
import type { SubnetPair } from './lease.js';

const keyPattern = /^([0-9.]+)-([0-9]{1,2})(?:&([0-9a-f:]+)-([0-9]{1,3}))?$/;

export function formatSubnetKey(pair: SubnetPair): string {
  // Joined, not a template: the key is held per peer, and join makes a flat string (ip.ts, formatIp).
  const v4 = pair.ipv4 ? [formatIp(pair.ipv4.ip), pair.ipv4.prefix].join('-') : '0.0.0.0-0';
  return pair.ipv6 ? [v4, '&', formatIp(pair.ipv6.ip), '-', pair.ipv6.prefix].join('') : v4;
}

/**
 * The subnets named by a key segment, or undefined when it is not one. Stricter than flannel,
 * which anchors its pattern only at the end: a segment with anything before the address, host
 * bits set, or a non-canonical IPv6 text is not a lease (registry contents are untrusted).
 */
export function parseSubnetKey(segment: string): SubnetPair | undefined {
  const m = keyPattern.exec(segment);
  if (!m) return undefined;
  const ipv4 = exactCidr(`${m[1]}/${m[2]}`);
  if (!ipv4) return undefined;
  const hasV4 = !(ipv4.prefix === 0 && ipv4.ip.value === 0n);
  if (m[3] === undefined) return hasV4 ? { ipv4 } : undefined;
  const ipv6 = exactCidr(`${m[3]}/${m[4]}`);
  if (!ipv6 || ipv6.ip.family !== 6 || formatIp(ipv6.ip) !== m[3]) return undefined;
  // Literals of their exact shape: a pair is kept per peer, and one built up from {} has room for four.
  return hasV4 ? { ipv4, ipv6 } : { ipv6 };
}

/** A CIDR whose text had no host bits set: `198.18.3.1-24` names no lease. */
function exactCidr(text: string): Cidr | undefined {
  const cidr = tryParseCidr(text);
  const addr = tryParseIp(text.slice(0, text.indexOf('/')));
  if (!cidr || !addr || addr.value !== cidr.ip.value) return undefined;
  return cidr;
}
