/**
 * Devices that flannel's backends (and weft's) create, by name, and which of them a node's
 * configured backend does not use: what a backend switch, a new VNI or a family turned off leaves
 * carrying stale routes (the kernel takes a device's routes with it). A name that no flannel
 * backend uses is never touched, and neither is a device that this agent's previous lease does
 * not show as its own: several agents run on one host (one per network, flannel's running.md),
 * and another's `flannel.2` is not this one's leftover. Pure.
 */
import { isJsonObject, member } from '../json/go-json.js';
import type { LeaseAttrs } from '../lease/lease.js';

/** `flannel.<VNI>`, `flannel-v6.<VNI>` (vxlan), `flannel0` (udp), `flannel-wg`, `flannel-wg-v6` (wireguard). */
const flannelDevice = /^(flannel(-v6)?\.\d{1,8}|flannel0|flannel-wg(-v6)?)$/;

export function isFlannelDevice(name: string): boolean {
  return flannelDevice.test(name);
}

/** The flannel devices among `present` that are not in `used`. */
export function leftoverDevices(present: readonly string[], used: readonly string[]): string[] {
  return present.filter((name) => isFlannelDevice(name) && !used.includes(name));
}

/** A device as the kernel lists it: its name and, for vxlan, its MAC. */
export interface PresentDevice {
  readonly name: string;
  readonly mac?: string;
}

/**
 * The leftovers (leftoverDevices) that this agent's previous lease shows it made: a vxlan device
 * with the VtepMAC it published (BackendData for `flannel.<VNI>`, BackendV6Data for
 * `flannel-v6.<VNI>`), `flannel0` after a udp lease, the WireGuard devices after a wireguard
 * lease. Without a previous lease nothing is this agent's to remove.
 */
export function ownLeftovers(present: readonly PresentDevice[], used: readonly string[], previous: LeaseAttrs | undefined): string[] {
  if (!previous) return [];
  const macs = [previous.backendData, previous.backendV6Data].map(vtepMacOf);
  return leftoverDevices(present.map((d) => d.name), used).filter((name) => {
    const device = present.find((d) => d.name === name)!;
    if (name === 'flannel0') return previous.backendType === 'udp';
    if (name.startsWith('flannel-wg')) return previous.backendType === 'wireguard';
    const mac = name.startsWith('flannel-v6.') ? macs[1] : macs[0];
    return mac !== undefined && device.mac?.toLowerCase() === mac;
  });
}

function vtepMacOf(data: string | undefined): string | undefined {
  if (data === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(data);
    const mac = isJsonObject(parsed) ? member(parsed, 'VtepMAC') : undefined;
    return typeof mac === 'string' ? mac.toLowerCase() : undefined;
  } catch {
    return undefined;
  }
}
