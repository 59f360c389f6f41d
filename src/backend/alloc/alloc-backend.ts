/**
 * The alloc backend, as flannel's (pkg/backend/alloc): a lease and subnet.env, no data plane.
 * Something else routes between the nodes (a cloud's route tables, a controller), so the agent
 * makes no device, programs no peer and does not even follow the other leases; flannel's lease
 * carries the public address and no BackendType. In kube mode the agent reads its own Node with
 * GETs instead of an informer of every Node (kube-manager.ts), as flannel does for alloc.
 */
import { type Clock, systemClock } from '../../core/clock.js';
import type { LeaseAttrs, LeaseEvent } from '../../lease/lease.js';
import type { BackendFactory, Network } from '../backend.js';
import { passEveryPeriod } from '../liveness-pass.js';

export const allocBackend: BackendFactory = {
  /** alloc has no options besides Type. */
  checkOptions() {},
  deviceNames: () => [],
  async create(_config, deps) {
    const v4 = deps.planes.find((p) => p.family === 4);
    const v6 = deps.planes.find((p) => p.family === 6);
    const attrs: LeaseAttrs = {
      // flannel publishes PublicIP only; weft adds PublicIPv6 in dual-stack and IPv6-only (an IPv6-only
      // node's PublicIP reads 0.0.0.0, as in the other backends).
      publicIp: v4?.publicIp ?? { family: 4, value: 0n },
      ...(v6 ? { publicIpv6: v6.publicIp } : {}),
    };
    return new AllocNetwork(attrs, deps.extIface.mtu, deps.clock ?? systemClock);
  },
};

class AllocNetwork implements Network {
  readonly attrs: LeaseAttrs;
  readonly mtu: number;
  readonly #clock: Clock;

  constructor(attrs: LeaseAttrs, mtu: number, clock: Clock) {
    this.attrs = attrs;
    this.mtu = mtu;
    this.#clock = clock;
  }

  async setLease(): Promise<void> {}

  /**
   * Never reads `events` (the watch of the other leases is never started: nothing here uses
   * them). A pass over nothing every period keeps the liveness check truthful: the agent's loop
   * is alive.
   */
  run(_events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    return passEveryPeriod(this.#clock, signal);
  }

  peers(): [] {
    return [];
  }

  packetCounters(): undefined {
    return undefined;
  }
}
