/**
 * The running packet path: the addon's two threads over the TUN fd and the UDP socket, with the
 * forwarding table of the programmed peers. Restarted over a new fd when the TUN device is made
 * again; stopped before the fds are handed to the next agent, after the packets in hand are sent.
 */
import type { IpAddr } from '../../ip/ip.js';
import type { TunnelSpec } from './tunnel-kind.js';
import { type ForwarderCounters, type ForwarderHandle, type UdpTunAddon, counterNames, countersOf } from './udp-addon.js';

export interface ForwarderPath {
  readonly tunFd: number;
  readonly udpFd: number;
  readonly mtu: number;
  /** Source of the ICMP errors written back into the TUN: this node's subnet address. */
  readonly tunAddr: IpAddr;
  readonly port: number;
}

export class Forwarder {
  readonly #addon: UdpTunAddon;
  #handle: ForwarderHandle | undefined;
  #table: Uint32Array = new Uint32Array(0);
  /** Counters of forwarders already stopped, so that the totals only grow. */
  #past: number[] = [];

  constructor(addon: UdpTunAddon) {
    this.#addon = addon;
  }

  get running(): boolean {
    return this.#handle !== undefined;
  }

  start(path: ForwarderPath): void {
    this.stop();
    this.#handle = this.#addon.start(path.tunFd, path.udpFd, path.mtu, Number(path.tunAddr.value), path.port, this.#table);
  }

  setTable(tunnels: readonly TunnelSpec[]): void {
    this.#table = tableTriples(tunnels);
    if (this.#handle) this.#addon.setTable(this.#handle, this.#table);
  }

  /** Totals since the agent started, over every forwarder it ran. */
  counters(): ForwarderCounters {
    const now = this.#handle ? this.#addon.counters(this.#handle) : [];
    return countersOf(counterNames.map((_, i) => (this.#past[i] ?? 0) + (now[i] ?? 0)));
  }

  stop(): void {
    if (!this.#handle) return;
    const last = this.#addon.counters(this.#handle);
    this.#addon.stop(this.#handle);
    this.#handle = undefined;
    this.#past = counterNames.map((_, i) => (this.#past[i] ?? 0) + (last[i] ?? 0));
  }
}

/** The table as the addon takes it: (subnet, prefix, peer) triples, addresses as host-order numbers. */
export function tableTriples(tunnels: readonly TunnelSpec[]): Uint32Array {
  const table = new Uint32Array(tunnels.length * 3);
  tunnels.forEach((t, i) => {
    table[3 * i] = Number(t.dst.ip.value);
    table[3 * i + 1] = t.dst.prefix;
    table[3 * i + 2] = Number(t.endpoint.value);
  });
  return table;
}
