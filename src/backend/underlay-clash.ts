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

/**
 * The established leases' subnets and public IPs, per family, in address order: a check is a
 * binary search, and nothing is allocated per check but the newcomer's own range. It runs for
 * every lease of the start-up burst, where whatever it allocates adds to the agent's peak.
 *
 * Kept for every peer while it lives, so flat: a subnet is three slots of one array (its first
 * address, its length, the lease's key) and a public IP two (the address, the key), instead of an
 * object and a bigint for its last address each (docs/benchmarks.md, the compact peer).
 */
export class UnderlayIndex {
  /** Per family: first, prefix, key; sorted by first. */
  readonly #subnets = new Map<Family, Slot[]>();
  /** Per family: address, key; sorted by address. */
  readonly #ips = new Map<Family, Slot[]>();
  /** The largest subnet indexed per family, less one: how far back a subnet holding an address can start. */
  readonly #widest = new Map<Family, bigint>();

  /** Indexes the families of `lease` that are programmed; a key indexed before must be removed first. */
  add(key: string, lease: Lease, families: readonly Family[]): void {
    for (const f of families) {
      const subnet = subnetOf(lease.subnet, f);
      if (subnet) {
        insert(this.#subnets, f, SUBNET, subnet.ip.value, subnet.prefix, key);
        const part = hostPart(f, subnet.prefix);
        if (part > (this.#widest.get(f) ?? -1n)) this.#widest.set(f, part);
      }
      const ip = publicIpOf(lease.attrs, f);
      if (ip?.family === f) insert(this.#ips, f, IP, ip.value, undefined, key);
    }
  }

  /** Forgets what `key` indexed for `lease` (the lease it was added with). A binary search per span, not a scan: with 5000 peers every lease event removes one. */
  remove(key: string, lease: Lease): void {
    for (const f of [4, 6] as const) {
      const subnet = subnetOf(lease.subnet, f);
      if (subnet) drop(this.#subnets.get(f), SUBNET, subnet.ip.value, key);
      const ip = publicIpOf(lease.attrs, f);
      if (ip?.family === f) drop(this.#ips.get(f), IP, ip.value, key);
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
        for (let at = upperBound(subnets, SUBNET, ip.value) - 1; at >= 0 && (subnets[at * SUBNET] as bigint) >= reach; at--) {
          const first = subnets[at * SUBNET] as bigint;
          const prefix = subnets[at * SUBNET + 1] as number;
          const holder = subnets[at * SUBNET + 2] as string;
          if (holder !== key && ip.value <= first + hostPart(f, prefix)) return { code: 'public_ip_in_lease_subnet', holder, ip, subnet: { ip: { family: f, value: first }, prefix } };
        }
      }
      const subnet = subnetOf(lease.subnet, f);
      const ips = this.#ips.get(f);
      if (!subnet || !ips) continue;
      const last = subnet.ip.value + hostPart(f, subnet.prefix);
      for (let i = upperBound(ips, IP, subnet.ip.value - 1n); i < ips.length / IP && (ips[i * IP] as bigint) <= last; i++) {
        const holder = ips[i * IP + 1] as string;
        if (holder !== key) return { code: 'covers_lease_public_ip', holder, ip: { family: f, value: ips[i * IP] as bigint }, subnet };
      }
    }
    return undefined;
  }
}

/** Slots per span: a subnet's first address, length and key; a public IP's address and key. */
type Slot = bigint | number | string;
const SUBNET = 3;
const IP = 2;

/** The largest host part of a subnet, made once per family and length: no bigint per check. */
const hostParts = new Map<number, bigint>();
function hostPart(family: Family, prefix: number): bigint {
  const id = family * 256 + prefix;
  let part = hostParts.get(id);
  if (part === undefined) hostParts.set(id, (part = (1n << BigInt((family === 4 ? 32 : 128) - prefix)) - 1n));
  return part;
}

function insert(index: Map<Family, Slot[]>, family: Family, stride: number, first: bigint, prefix: number | undefined, key: string): void {
  let list = index.get(family);
  if (!list) index.set(family, (list = []));
  const at = upperBound(list, stride, first) * stride;
  if (prefix !== undefined) list.splice(at, 0, first, prefix, key);
  else list.splice(at, 0, first, key);
}

/** Takes `key`'s span starting at `first` out of the list. */
function drop(list: Slot[] | undefined, stride: number, first: bigint, key: string): void {
  if (!list) return;
  for (let i = upperBound(list, stride, first - 1n); i < list.length / stride && list[i * stride] === first; i++) {
    if (list[i * stride + stride - 1] !== key) continue;
    list.splice(i * stride, stride);
    return;
  }
}

/** The first span (an index in spans, not slots) that starts above `value`. */
function upperBound(list: readonly Slot[], stride: number, value: bigint): number {
  let lo = 0;
  let hi = list.length / stride;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((list[mid * stride] as bigint) <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
