/**
 * What each encapsulation costs per family, and the MTUs that follow (spec §7). Pure.
 *
 * vxlan: inner Ethernet 14 + vxlan 8 + UDP 8 + IP 20 or 40. flannel uses 50 for both families,
 * but the kernel caps an IPv6 vxlan device at underlay − 70 (it reported 1430 when asked for 1450
 * over a 1500-byte link), so weft asks for what the kernel gives (spec §12 item 15). udp: IPv4 20
 * + UDP 8, as flannel; it carries IPv4 only. host-gw: nothing, pods get the interface's MTU.
 */
import type { Family } from '../ip/ip.js';

export const encapsulationOverhead = {
  vxlan: { 4: 50, 6: 70 },
  udp: { 4: 28, 6: 48 },
  none: { 4: 0, 6: 0 },
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
