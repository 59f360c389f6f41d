/**
 * What each encapsulation costs per family, and the MTUs that follow (spec §7). Pure.
 *
 * vxlan: inner Ethernet 14 + vxlan 8 + UDP 8 + IP 20 or 40. flannel uses 50 for both families,
 * but the kernel caps an IPv6 vxlan device at underlay − 70 (it reported 1430 when asked for 1450
 * over a 1500-byte link), so weft asks for what the kernel gives (spec §12 item 15). udp: IPv4 20
 * + UDP 8, as flannel; it carries IPv4 only. host-gw: nothing, pods get the interface's MTU.
 * wireguard: 80 whatever the family, as flannel (spec wireguard.md §1.7).
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { Family } from '../ip/ip.js';

export const encapsulationOverhead = {
  vxlan: { 4: 50, 6: 70 },
  udp: { 4: 28, 6: 48 },
  none: { 4: 0, 6: 0 },
  // flannel's: IPv6 40 + UDP 8 + WireGuard's header 16 + tag 16, for both families.
  wireguard: { 4: 80, 6: 80 },
} as const satisfies Record<string, Record<Family, number>>;

export type Encapsulation = keyof typeof encapsulationOverhead;

/** The MTU of a device that carries one family's pod packets over an underlay of `underlay` bytes. */
export function deviceMtu(encapsulation: Encapsulation, underlay: number, family: Family): number {
  return underlay - encapsulationOverhead[encapsulation][family];
}

/** FLANNEL_MTU: the smallest of the families' device MTUs, so a pod packet fits whichever family carries it. */
export function podMtu(encapsulation: Encapsulation, underlay: number, families: readonly Family[]): number {
  return Math.min(...families.map((f) => deviceMtu(encapsulation, underlay, f)));
}

/** The least MTU a link may have to carry the family at all (RFC 791, RFC 8200). */
export const minimumMtu = { 4: 68, 6: 1280 } as const satisfies Record<Family, number>;

/**
 * Refuses an underlay MTU (`Backend.MTU`) whose device MTU would be below what its family needs:
 * the kernel would refuse the device (EINVAL) or a negative MTU would reach netlink, and the agent
 * would exit in a restart loop instead of at the config check with the reason.
 */
export function checkUnderlayMtu(encapsulation: Encapsulation, underlay: number, families: readonly Family[], what = 'Backend.MTU'): void {
  for (const family of families) {
    const least = minimumMtu[family] + encapsulationOverhead[encapsulation][family];
    if (underlay < least) {
      throw new WeftError(ErrorCodes.CONFIG, `${what} ${underlay} is too small: an IPv${family} ${encapsulation} device needs an underlay MTU of at least ${least} (${minimumMtu[family]} + ${encapsulationOverhead[encapsulation][family]} bytes of encapsulation)`);
    }
  }
}
