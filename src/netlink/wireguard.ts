/**
 * The WireGuard port: a device's key, port and peers, read and changed, whoever holds the device
 * (the kernel over generic netlink, or weft's own data path). Keys are standard base64, as flannel
 * publishes them; the adapters translate. Errors are KernelErrors with an errno name.
 */
import type { Cidr } from '../ip/cidr.js';
import type { IpAddr } from '../ip/ip.js';

export interface WgEndpoint {
  readonly ip: IpAddr;
  readonly port: number;
}

/** A peer as a device is told it. */
export interface WgPeer {
  readonly publicKey: string;
  readonly endpoint?: WgEndpoint;
  readonly presharedKey?: string;
  /** 0: off. */
  readonly keepaliveS: number;
  readonly allowedIps: readonly Cidr[];
}

/** A peer as a device reports it. */
export interface WgPeerState extends WgPeer {
  /** Wall-clock milliseconds of the last handshake; absent: none yet. */
  readonly lastHandshakeMs?: number;
  readonly rxBytes: number;
  readonly txBytes: number;
}

export interface WgDevice {
  readonly listenPort: number;
  /** Standard base64 of the private key's public half; absent: no key yet. */
  readonly publicKey?: string;
  readonly peers: readonly WgPeerState[];
}

/** One change of a device; like the kernel's, applied in order and not as a transaction. */
export interface WgChange {
  readonly privateKey?: string;
  readonly listenPort?: number;
  /** Every peer not named in `peers` goes. */
  readonly replacePeers?: boolean;
  /** Peers to add or replace whole (their allowed IPs replaced), or to remove. */
  readonly peers?: ReadonlyArray<WgPeer | { readonly publicKey: string; readonly remove: true }>;
}

export interface WireGuardPort {
  /** The device `name` as it is now; undefined when there is none. */
  device(name: string): Promise<WgDevice | undefined>;
  configure(name: string, change: WgChange): Promise<void>;
  /** Releases what the port holds (a socket). */
  close?(): void;
}

export function isRemoval(p: WgPeer | { readonly remove: true }): p is { readonly publicKey: string; readonly remove: true } {
  return 'remove' in p && p.remove;
}
