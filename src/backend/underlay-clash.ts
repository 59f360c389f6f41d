/**
 * Public IPs and subnets across leases. Node addresses may lie inside the pod network (flannel's
 * guide carves a 10/8 Network while the nodes live elsewhere in 10/8), so one lease's public IP
 * can fall inside another lease's subnet. Programming both would send the underlay packets for
 * that address into the overlay, and the node behind it would drop off the cluster. The lease
 * programmed first keeps its place; a newcomer that would take it is refused, and tried again
 * whenever a lease goes. Pure: no I/O.
 */
import type { Cidr } from '../ip/cidr.js';
import type { Family, IpAddr } from '../ip/ip.js';
import { type Lease, publicIpOf, subnetOf } from '../lease/lease.js';

export interface UnderlayClash {
  /** `public_ip_in_lease_subnet` or `covers_lease_public_ip`, for the metrics. */
  readonly code: string;
  /** The established lease's key. */
  readonly holder: string;
  readonly ip: IpAddr;
  readonly subnet: Cidr;
}

/** An address range (a subnet, or one public IP) of an established lease. */
interface Span {
  readonly first: bigint;
  readonly last: bigint;
  readonly key: string;
}

/**
 * The established leases' subnets and public IPs, per family, in address order: a check is a
 * binary search, and nothing is allocated per check but the newcomer's own range. It runs for
 * every lease of the start-up burst, where whatever it allocates adds to the agent's peak.
 */
export class UnderlayIndex {
  readonly #subnets = new Map<Family, Span[]>();
  readonly #ips = new Map<Family, Span[]>();
  /** The largest subnet indexed per family, less one: how far back a subnet holding an address can start. */
  readonly #widest = new Map<Family, bigint>();
  /** The leases indexed, by key: a removal finds its spans by their addresses. */
  readonly #leases = new Map<string, Lease>();

  /** Indexes the families of `lease` that are programmed (replacing what `key` had). */
  add(key: string, lease: Lease, families: readonly Family[]): void {
    this.remove(key);
    this.#leases.set(key, lease);
    for (const f of families) {
      const subnet = subnetOf(lease.subnet, f);
      if (subnet) {
        const part = hostPart(subnet);
        insert(this.#subnets, f, { first: subnet.ip.value, last: subnet.ip.value + part, key });
        if (part > (this.#widest.get(f) ?? -1n)) this.#widest.set(f, part);
      }
      const ip = publicIpOf(lease.attrs, f);
      if (ip?.family === f) insert(this.#ips, f, { first: ip.value, last: ip.value, key });
    }
  }

  /** A binary search per span, not a scan: with 5000 peers every lease event removes one. */
  remove(key: string): void {
    const lease = this.#leases.get(key);
    if (!lease) return;
    this.#leases.delete(key);
    for (const f of [4, 6] as const) {
      const subnet = subnetOf(lease.subnet, f);
      if (subnet) drop(this.#subnets.get(f), subnet.ip.value, key);
      const ip = publicIpOf(lease.attrs, f);
      if (ip?.family === f) drop(this.#ips.get(f), ip.value, key);
    }
  }

  /**
   * The first established lease (other than `key` itself) whose subnet holds a public IP of
   * `lease`, or whose public IP lies in a subnet of `lease`, over the given families.
   */
  clash(key: string, lease: Lease, families: readonly Family[]): UnderlayClash | undefined {
    for (const f of families) {
      const ip = publicIpOf(lease.attrs, f);
      const subnets = this.#subnets.get(f);
      if (ip?.family === f && subnets) {
        // Subnets starting at or below the address, back to the widest one's reach: leases are
        // untrusted and may overlap, so the nearest start is not enough (a /16 around a /24).
        const reach = ip.value - (this.#widest.get(f) ?? 0n);
        for (let at = upperBound(subnets, ip.value) - 1; at >= 0 && subnets[at]!.first >= reach; at--) {
          const s = subnets[at]!;
          if (s.key !== key && ip.value <= s.last) return { code: 'public_ip_in_lease_subnet', holder: s.key, ip, subnet: spanCidr(s, f) };
        }
      }
      const subnet = subnetOf(lease.subnet, f);
      const ips = this.#ips.get(f);
      if (!subnet || !ips) continue;
      const last = subnet.ip.value + hostPart(subnet);
      for (let i = upperBound(ips, subnet.ip.value - 1n); i < ips.length && ips[i]!.first <= last; i++) {
        if (ips[i]!.key !== key) return { code: 'covers_lease_public_ip', holder: ips[i]!.key, ip: { family: f, value: ips[i]!.first }, subnet };
      }
    }
    return undefined;
  }
}

/** The largest host part of a subnet, made once per family and length: no bigint per check. */
const hostParts = new Map<number, bigint>();
function hostPart(c: Cidr): bigint {
  const id = c.ip.family * 256 + c.prefix;
  let part = hostParts.get(id);
  if (part === undefined) hostParts.set(id, (part = (1n << BigInt((c.ip.family === 4 ? 32 : 128) - c.prefix)) - 1n));
  return part;
}

function insert(index: Map<Family, Span[]>, family: Family, span: Span): void {
  let list = index.get(family);
  if (!list) index.set(family, (list = []));
  list.splice(upperBound(list, span.first), 0, span);
}

/** Takes `key`'s span starting at `first` out of the list. */
function drop(list: Span[] | undefined, first: bigint, key: string): void {
  if (!list) return;
  for (let i = upperBound(list, first - 1n); i < list.length && list[i]!.first === first; i++) {
    if (list[i]!.key !== key) continue;
    list.splice(i, 1);
    return;
  }
}

/** The first index whose span starts above `value`. */
function upperBound(list: readonly Span[], value: bigint): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.first <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A subnet span back as a CIDR, for the message. */
function spanCidr(s: Span, family: Family): Cidr {
  let size = s.last - s.first + 1n;
  let prefix = family === 4 ? 32 : 128;
  while (size > 1n) {
    size >>= 1n;
    prefix--;
  }
  return { ip: { family, value: s.first }, prefix };
}
