/**
 * The udp backend's packet path, native/udp-tun (N-API, built by `make setup`): it opens the TUN
 * device and the UDP socket and moves packets between them in two threads of its own, in batches.
 * Node cannot: a TUN needs an ioctl, and fs.read of one goes through the thread pool (about
 * 16,000 packets/s measured here). Everything else of the backend is TypeScript.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import { loadNativeAddon, nativeAddonPath, wrapCalls } from '../../core/native-addon.js';
import { KernelError } from '../../netlink/netlink.js';

declare const forwarderBrand: unique symbol;
/** A running forwarder (two threads); stop() it. */
export type ForwarderHandle = { readonly [forwarderBrand]: true };

export interface UdpTunAddon {
  /** Creates the persistent TUN device `name`, or attaches to it: an fd. */
  openTun(name: string): number;
  /** A UDP socket bound to addr (IPv4 as a host-order number):port. */
  openUdp(addr: number, port: number): number;
  /** What an inherited fd is: a TUN device, a bound IPv4 UDP socket, or neither. */
  describeFd(fd: number): { tun?: string; udp?: [addr: number, port: number] };
  /** Whether the fd survives execve (a graceful restart hands it on). */
  keepOnExec(fd: number, keep: boolean): void;
  closeFd(fd: number): void;
  /**
   * Starts the threads with the forwarding table already in place: after a restart the TUN holds
   * packets queued meanwhile, and each must find its peer. Triples as setTable takes them.
   */
  start(tunFd: number, udpFd: number, mtu: number, tunAddr: number, port: number, triples: Uint32Array): ForwarderHandle;
  /** (subnet, prefix, peer) triples, addresses as host-order numbers. */
  setTable(handle: ForwarderHandle, triples: Uint32Array): void;
  counters(handle: ForwarderHandle): number[];
  /** Returns once the packets in hand are delivered and both threads have ended. */
  stop(handle: ForwarderHandle): void;
  /** The packet functions of the forwarder itself, for tests. */
  decrementTtl(packet: Uint8Array): boolean;
  netUnreachable(packet: Uint8Array, src: number): Uint8Array | null;
  lookup(triples: Uint32Array, dst: number): number;
  /** The datagrams a TCP super packet from the TUN becomes on the wire. */
  segment(packet: Uint8Array, mss: number): Uint8Array[];
  /** The writes into the TUN that the receive path makes of these datagrams (gsoSize 0: as it came). */
  coalesce(segments: readonly Uint8Array[]): Array<{ packet: Uint8Array; gsoSize: number }>;
}

/** The forwarder's counters, in the order of native/udp-tun/forwarder.h. */
export const counterNames = [
  'tunPackets', 'sent', 'sentBytes', 'received', 'receivedBytes', 'delivered', 'noRoute', 'ttlExpired', 'malformed', 'sendErrors', 'writeErrors', 'tunGone', 'notIpv4',
] as const;
export type ForwarderCounters = Record<(typeof counterNames)[number], number>;

export function countersOf(raw: readonly number[]): ForwarderCounters {
  return Object.fromEntries(counterNames.map((name, i) => [name, raw[i] ?? 0])) as ForwarderCounters;
}

let loaded: UdpTunAddon | undefined;

/** The calls that ask the kernel for something (the addon throws an Error with a numeric `errno`). */
const kernelCalls = ['openTun', 'openUdp', 'describeFd', 'keepOnExec', 'closeFd', 'start'] as const;

/**
 * The addon, its kernel failures as KernelError (WEFT_ERR_KERNEL with the errno's name);
 * WEFT_ERR_CONFIG saying how to build it when it was not built.
 */
export function udpTunAddon(): UdpTunAddon {
  if (loaded) return loaded;
  const raw = loadNativeAddon<UdpTunAddon>('udp-tun', 'udp_tun');
  if (!raw) {
    throw new WeftError(ErrorCodes.CONFIG, `the udp backend needs weft's native addon ${nativeAddonPath('udp-tun', 'udp_tun')}, which was not built: run \`make setup\` (it needs gcc, g++, make and python3)`);
  }
  const wrapped = wrapCalls(raw, kernelCalls, (message, errno, cause) => new KernelError(message, errno, { cause }));
  loaded = wrapped;
  return loaded;
}
