/**
 * Subnet allocation policy (spec §4.1 steps 2-4), pure: the registry's leases and a random
 * source come in, a decision comes out. Each enabled family is allocated independently.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { NetworkConfig, SubnetRange } from '../config/network-config.js';
import { type Cidr, formatCidr, lastIp, overlaps, subnetsOf } from '../ip/cidr.js';
import { formatIp } from '../ip/ip.js';
import type { SubnetPair } from '../lease/lease.js';

/** flannel picks at random among the first this many free subnets. */
export const candidateLimit = 100;

/** True when `cidr` is a subnet this config would hand out: right length, between min and max. */
export function inRange(range: SubnetRange, cidr: Cidr): boolean {
  return (
    cidr.ip.family === range.network.ip.family &&
    cidr.prefix === range.subnetLen &&
    cidr.ip.value >= range.subnetMin.value &&
    cidr.ip.value <= range.subnetMax.value
  );
}

/**
 * Whether a lease's subnet holds a place in the range: of the family, smaller than the network and
 * overlapping it. That is what every agent programs (peer-checks.ts; flanneld programs every
 * lease), so a new subnet must not overlap it, whatever its length. A lease as large as the
 * network (a `-16` key in a /16 network) is one no weft programs, so it blocks nothing: flanneld
 * counts it, and one stray key then leaves a cluster "out of subnets".
 */
export function holdsPlace(range: SubnetRange, cidr: Cidr): boolean {
  return cidr.ip.family === range.network.ip.family && cidr.prefix > range.network.prefix && overlaps(range.network, cidr);
}

/** The leases (their subnets) that hold a place in a range of `config` overlapping `pair`. */
export function blockers(config: NetworkConfig, taken: readonly SubnetPair[], pair: SubnetPair): SubnetPair[] {
  const blocks = (range: SubnetRange | undefined, mine: Cidr | undefined, theirs: Cidr | undefined): boolean =>
    range !== undefined && mine !== undefined && theirs !== undefined && holdsPlace(range, theirs) && overlaps(mine, theirs);
  return taken.filter((t) => blocks(config.ipv4, pair.ipv4, t.ipv4) || blocks(config.ipv6, pair.ipv6, t.ipv6));
}

/** flannel's compatibility test for reusing a lease or the subnet file's subnet. */
export function isCompatible(config: NetworkConfig, pair: SubnetPair): boolean {
  const fits = (range: SubnetRange | undefined, cidr: Cidr | undefined): boolean =>
    range ? cidr !== undefined && inRange(range, cidr) : cidr === undefined;
  return fits(config.ipv4, pair.ipv4) && fits(config.ipv6, pair.ipv6);
}

/** The first `limit` subnets of the range that overlap none of `taken`, in address order. */
export function freeSubnets(range: SubnetRange, taken: readonly Cidr[], limit = candidateLimit): Cidr[] {
  const family = range.network.ip.family;
  const busy = taken
    .filter((c) => c.ip.family === family)
    .map((c) => ({ first: c.ip.value, last: lastIp(c).value }))
    .sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const out: Cidr[] = [];
  let i = 0;
  for (const candidate of subnetsOf(range.network, range.subnetLen, { first: range.subnetMin, last: range.subnetMax })) {
    const first = candidate.ip.value;
    const last = lastIp(candidate).value;
    // Candidates ascend, so a busy block that ends before this one is behind every later one too.
    while (i < busy.length && busy[i]!.last < first) i++;
    let free = true;
    for (let j = i; j < busy.length && busy[j]!.first <= last; j++) {
      if (busy[j]!.last >= first) {
        free = false;
        break;
      }
    }
    if (free) {
      out.push(candidate);
      if (out.length >= limit) break;
    }
  }
  return out;
}

/**
 * A random free subnet (pair) for every enabled family, or WEFT_ERR_OUT_OF_SUBNETS naming the
 * exhausted range. A family's subnet in `keep` that fits the config is kept as it is (a family
 * added to or dropped from the config leaves the other's subnet alone); the caller has checked
 * that it is free. Only leases that hold a place in the range (holdsPlace) count as taken.
 */
export function allocateSubnet(config: NetworkConfig, taken: readonly SubnetPair[], random: () => number = Math.random, keep: SubnetPair = {}): SubnetPair {
  const pick = (range: SubnetRange, kept: Cidr | undefined, cidrs: Cidr[]): Cidr => {
    if (kept && inRange(range, kept)) return kept;
    const placed = cidrs.filter((c) => holdsPlace(range, c));
    const free = freeSubnets(range, placed);
    if (free.length === 0) {
      const some = placed.slice(0, 3).map(formatCidr).join(', ');
      throw new WeftError(
        ErrorCodes.OUT_OF_SUBNETS,
        `out of subnets: every /${range.subnetLen} of ${formatCidr(range.network)} from ${formatIp(range.subnetMin)} to ${formatIp(range.subnetMax)} is leased (${placed.length} leases hold a place, e.g. ${some || 'none'}; leases as large as the network are not counted)`,
      );
    }
    return free[Math.floor(random() * free.length)] ?? free[0]!;
  };
  const result: { ipv4?: Cidr; ipv6?: Cidr } = {};
  if (config.ipv4) result.ipv4 = pick(config.ipv4, keep.ipv4, taken.flatMap((p) => (p.ipv4 ? [p.ipv4] : [])));
  if (config.ipv6) result.ipv6 = pick(config.ipv6, keep.ipv6, taken.flatMap((p) => (p.ipv6 ? [p.ipv6] : [])));
  return result;
}
