/**
 * weft's netlink socket (native/nl-socket; rtnetlink, or generic netlink for WireGuard): synchronous sends, and every datagram waiting read
 * at once and handed over as one buffer; an overflow of its receive buffer (ENOBUFS) is reported,
 * not fatal. See the addon's header for why it replaced the `netlink` package's socket.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import { loadNativeAddon } from '../core/native-addon.js';

interface Addon {
  open(groups: number[], receiveBuffer: number, onData: (chunk: Buffer | undefined, overflow: number) => void, protocol?: number): object;
  send(handle: object, datagram: Buffer): number;
  close(handle: object): void;
  port(handle: object): number;
  ignore(handle: object, port: number, types: number[]): void;
}

let addon: Addon | undefined;

/** What the channel and the monitor need of a socket; a test's fake kernel is one too. */
export interface DatagramSocket {
  /** Sends one datagram of requests to the kernel, which handles them before this returns: 0, or the errno of a failed send. */
  send(datagram: Buffer): number;
  close(): void;
  /** The port id the kernel gave the socket: the sender named in the notifications its requests cause. */
  port?(): number;
}

/** A socket of weft's own over the native addon. */
export interface NetlinkSocket extends DatagramSocket {
  port(): number;
  /**
   * Has the kernel drop, before they are read, messages of these types (at most 8) sent on behalf
   * of the socket with port id `port`: a listener's view without the echo of that socket's writes.
   */
  ignore(port: number, types: readonly number[]): void;
}

/**
 * Calls `onData` with the datagrams received since the last call, concatenated (each padded to 4
 * bytes), and with the errno of an overflow (0 when none).
 */
export type DataListener = (chunk: Buffer | undefined, overflow: number) => void;

/** NETLINK_GENERIC: the families the kernel registers by name (WireGuard's among them). */
export const NETLINK_GENERIC = 16;

export function openNetlinkSocket(options: { groups?: readonly number[]; receiveBuffer?: number; protocol?: number }, onData: DataListener): NetlinkSocket {
  addon ??= loadNativeAddon<Addon>('nl-socket', 'nl_socket');
  if (!addon) throw new WeftError(ErrorCodes.INTERNAL, 'the native addon native/nl-socket is not built: run make setup');
  const native = addon;
  const handle = options.protocol === undefined ? native.open([...(options.groups ?? [])], options.receiveBuffer ?? 0, onData) : native.open([...(options.groups ?? [])], options.receiveBuffer ?? 0, onData, options.protocol);
  return {
    send: (datagram) => native.send(handle, datagram),
    close: () => native.close(handle),
    port: () => native.port(handle),
    ignore: (port, types) => native.ignore(handle, port, [...types]),
  };
}
