/** How the wireguard backend holds its devices: the kernel's WireGuard (kernel-path.ts), or weft's own (userspace-path.ts). */
import type { WireGuardPort } from '../../netlink/wireguard.js';

export interface WgDeviceSpec {
  readonly listenPort: number;
  readonly privateKey: string;
  readonly mtu: number;
}

export interface WgDataPath {
  readonly kind: 'kernel' | 'userspace';
  readonly port: WireGuardPort;
  /** Makes the device, or takes the one there, with this key and port; its link index. */
  ensure(name: string, spec: WgDeviceSpec): Promise<number>;
  /** Packet and handshake counters since start, summed over the devices (userspace only). */
  counters(): Readonly<Record<string, number>> | undefined;
  /** Releases the devices; the links, their addresses and routes stay. */
  stop(): void;
  /** Calls `changed` when a device was changed by hand (its UAPI socket); returns the unsubscribe. */
  onOutsideChange?(changed: () => void): () => void;
}
