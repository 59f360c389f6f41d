/**
 * Devices that flannel's backends (and weft's) create, by name, and which of them a node's
 * configured backend does not use: what a backend switch, a new VNI or a family turned off leaves
 * carrying stale routes (the kernel takes a device's routes with it). A name that no flannel
 * backend uses is never touched. Pure.
 */

/** `flannel.<VNI>`, `flannel-v6.<VNI>` (vxlan), `flannel0` (udp), `flannel-wg`, `flannel-wg-v6` (wireguard). */
const flannelDevice = /^(flannel(-v6)?\.\d{1,8}|flannel0|flannel-wg(-v6)?)$/;

export function isFlannelDevice(name: string): boolean {
  return flannelDevice.test(name);
}

/** The flannel devices among `present` that are not in `used`. */
export function leftoverDevices(present: readonly string[], used: readonly string[]): string[] {
  return present.filter((name) => isFlannelDevice(name) && !used.includes(name));
}
