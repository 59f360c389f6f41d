/**
 * weft's own WireGuard data path, native/wireguard (N-API over OpenSSL's libcrypto, built by
 * `make setup`): a TUN device and a UDP socket moved between by threads of its own, configured
 * with WireGuard's UAPI text. Used where the kernel has no WireGuard.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import { loadNativeAddon, nativeAddonPath, wrapCalls } from '../../core/native-addon.js';
import { KernelError } from '../../netlink/netlink.js';

declare const deviceBrand: unique symbol;
/** A running device (three threads); stop() it. */
export type WgDeviceHandle = { readonly [deviceBrand]: true };

export interface WireguardAddon {
  /** Creates the persistent TUN device `name`, or attaches to it: an fd. */
  openTun(name: string): number;
  /** A UDP socket on every address at `port` (IPv6 and IPv4, or IPv4 alone without IPv6). */
  openUdp(port: number): number;
  closeFd(fd: number): void;
  /**
   * A running device over the two fds. With `stateFd`, what the previous agent's stop(handle, true)
   * exported is restored before any thread reads a packet (what queued during the restart finds
   * its session); the state is used up by the call, whether it succeeds or not, and the fd is the
   * caller's to close.
   */
  start(tunFd: number, udpFd: number, mtu: number, port: number, stateFd?: number): WgDeviceHandle;
  /** A UAPI request (`get=1` or `set=1`, ending in an empty line): the answer, errno line included. */
  uapi(handle: WgDeviceHandle, request: string): string;
  counters(handle: WgDeviceHandle): number[];
  /** Joins the threads; every key is wiped. With `exportState`, the device's state first goes into a memfd for the next agent: its fd, or -1. */
  stop(handle: WgDeviceHandle): void;
  stop(handle: WgDeviceHandle, exportState: true): number;
  /** The peers start() restored from the state it was given; -1 without one, or when it was not restored (another version's, or unreadable). */
  restoredPeers(handle: WgDeviceHandle): number;
  /** What an inherited fd is: a TUN device, a bound UDP socket (its port), or neither. */
  describeFd(fd: number): { tun?: string; udpPort?: number };
  /** Whether the fd survives execve (a graceful restart hands it on). */
  keepOnExec(fd: number, keep: boolean): void;
  /** The protocol's pieces, for tests. */
  hchacha20(key: Uint8Array, nonce: Uint8Array): Uint8Array;
  mac(key: Uint8Array, data: Uint8Array): Uint8Array;
  handshake(initiatorPriv: Uint8Array, responderPriv: Uint8Array, psk: Uint8Array, initiatorEphemeral: Uint8Array, responderEphemeral: Uint8Array, timestamp: Uint8Array): HandshakeResult;
  replay(counters: readonly bigint[]): boolean[];
  /** The transport data message a session with this send key makes of `packet`; null past the counter limit. */
  sealData(sendKey: Uint8Array, receiver: number, counter: bigint, packet: Uint8Array, mtu: number): Uint8Array | null;
  timersDue(state: TimerState): number;
}

export interface HandshakeResult {
  readonly initiation: Uint8Array;
  readonly response: Uint8Array;
  readonly initiatorSend: Uint8Array;
  readonly initiatorReceive: Uint8Array;
  readonly responderSend: Uint8Array;
  readonly responderReceive: Uint8Array;
}

/** native/wireguard/timers.h's state, times in milliseconds (0: never). */
export interface TimerState {
  readonly now: number;
  readonly lastSent?: number;
  readonly lastDataSent?: number;
  readonly lastReceived?: number;
  readonly lastDataReceived?: number;
  readonly lastHandshake?: number;
  readonly lastInitiationSent?: number;
  readonly attemptStarted?: number;
  readonly currentKeypairCreated?: number;
  /** 1: this side initiated the current session, 0: it responded, -1: none. */
  readonly currentKeypairInitiator: number;
  readonly wantHandshake?: number;
  readonly persistentKeepaliveS?: number;
  readonly jitterMs?: number;
}

export const timerActions = { sendInitiation: 1, giveUp: 2, sendKeepalive: 4, wipeKeys: 8 } as const;

/** The device's counters, in the order of native/wireguard/device.h. */
export const wgCounterNames = [
  'tunPackets', 'sent', 'sentBytes', 'received', 'receivedBytes', 'delivered', 'noPeer', 'noEndpoint', 'staged', 'stagedDropped',
  'initiationsSent', 'initiationsReceived', 'responsesSent', 'responsesReceived', 'handshakes', 'cookiesSent', 'cookiesReceived',
  'badMac', 'badHandshake', 'unknownPeer', 'replayedHandshake', 'badData', 'replayed', 'badSource', 'malformed', 'sendErrors', 'writeErrors', 'keepalivesSent',
] as const;

export function wgCountersOf(raw: readonly number[]): Record<(typeof wgCounterNames)[number], number> {
  return Object.fromEntries(wgCounterNames.map((name, i) => [name, raw[i] ?? 0])) as Record<(typeof wgCounterNames)[number], number>;
}

const kernelCalls = ['openTun', 'openUdp', 'start', 'keepOnExec'] as const;
let loaded: WireguardAddon | undefined;

/** The addon with its kernel failures as KernelErrors; WEFT_ERR_CONFIG saying how to build it when it was not built. */
export function wireguardAddon(): WireguardAddon {
  if (loaded) return loaded;
  const raw = loadNativeAddon<WireguardAddon>('wireguard', 'wireguard');
  if (!raw) {
    throw new WeftError(ErrorCodes.CONFIG, `the wireguard backend needs weft's native addon ${nativeAddonPath('wireguard', 'wireguard')} where the kernel has no WireGuard, and it was not built: run \`make setup\` (it needs gcc, make, python3 and libssl-dev)`);
  }
  const wrapped = wrapCalls(raw, kernelCalls, (message, errno, cause) => new KernelError(message, errno, { cause }));
  loaded = wrapped;
  return loaded;
}
