/**
 * WireGuard peers as an entry kind: one entry per device and public key, as flannel programs them
 * (spec wireguard.md §1.9), kept by the reconciler like routes. A peer whose key changed is a new
 * entry and the old one is removed with it, so no stale peer outlives its lease (flannel keeps the
 * old one until the device is made again, §1.11); a peer on the device that no lease wants (added
 * by hand, or left by an earlier run) is removed by the next full pass, and one changed by hand is
 * put back. The kernel's port sends no notifications (the periodic pass and link changes find
 * drift there); weft's own device announces changes made through its UAPI socket.
 */
import { type Cidr, cidrEquals, formatCidr } from '../../ip/cidr.js';
import { formatIp, ipEquals } from '../../ip/ip.js';
import type { WgPeer, WireGuardPort } from '../../netlink/wireguard.js';
import type { EntryKind } from '../entry-kind.js';

export interface WgPeerEntry extends WgPeer {
  readonly device: string;
}

export const wgPeerKey = (e: WgPeerEntry): string => [e.device, e.publicKey].join('/');

const sameCidrs = (a: readonly Cidr[], b: readonly Cidr[]): boolean => a.length === b.length && a.every((c) => b.some((d) => cidrEquals(c, d)));

export function wgPeerMatches(want: WgPeerEntry, have: WgPeerEntry): boolean {
  const endpoint = want.endpoint && have.endpoint ? ipEquals(want.endpoint.ip, have.endpoint.ip) && want.endpoint.port === have.endpoint.port : want.endpoint === have.endpoint;
  return endpoint && want.keepaliveS === have.keepaliveS && want.presharedKey === have.presharedKey && sameCidrs(want.allowedIps, have.allowedIps);
}

export function describeWgPeer(e: WgPeerEntry): string {
  const at = e.endpoint ? ` at ${formatIp(e.endpoint.ip)}:${e.endpoint.port}` : '';
  return `the WireGuard key ${e.publicKey} on ${e.device}${at} for ${e.allowedIps.map(formatCidr).join(', ')}`;
}

export function wgPeerKind(port: WireGuardPort, devices: () => readonly string[], onOutsideChange?: (changed: () => void) => () => void): EntryKind<WgPeerEntry> {
  const peerOf = (e: WgPeerEntry): WgPeer => {
    const { device: _, ...peer } = e;
    return peer;
  };
  return {
    name: 'wg-peer',
    key: wgPeerKey,
    async list() {
      const out: WgPeerEntry[] = [];
      for (const device of devices()) for (const p of (await port.device(device))?.peers ?? []) out.push({ device, ...p });
      return out;
    },
    matches: wgPeerMatches,
    put: (e) => port.configure(e.device, { peers: [peerOf(e)] }),
    remove: (e) => port.configure(e.device, { peers: [{ publicKey: e.publicKey, remove: true }] }),
    departs: () => false,
    // One key on one device is one peer: a second lease publishing a key that a live lease holds
    // would take that node's subnet over. The lease that had it first keeps it.
    exclusive: { code: 'duplicate_public_key', describe: describeWgPeer },
    ...(onOutsideChange ? { onOutsideChange } : {}),
  };
}
