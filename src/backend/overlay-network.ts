/**
 * The skeleton every backend shares (flannel copies it into each backend): the family planes and
 * this node's lease in them, the attributes it publishes, the backend-type filter on peer leases,
 * the one peer check, the reconciler and what it reports. A backend supplies a BackendDriver:
 * its per-family program for a peer, its entry kinds, its own entries and its devices.
 */
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { Family } from '../ip/ip.js';
import { type Lease, type LeaseAttrs, type LeaseEvent } from '../lease/lease.js';
import type { Netlink } from '../netlink/netlink.js';
import type { Network, PacketCounters } from './backend.js';
import type { EntryKind, Program } from './entry-kind.js';
import { type FamilyPlane, withLease } from './family-plane.js';
import { type Refusal, programFamilies } from './lease-program.js';
import type { PeerStatus } from './peer-report.js';
import { Reconciler } from './reconciler.js';

/** The planes of the families a backend carries, with this node's subnets once leased. */
export class PlaneSet {
  readonly #initial: readonly FamilyPlane[];
  #planes: readonly FamilyPlane[];

  constructor(planes: readonly FamilyPlane[]) {
    this.#initial = planes;
    this.#planes = planes;
  }

  get all(): readonly FamilyPlane[] {
    return this.#planes;
  }

  get families(): Family[] {
    return this.#planes.map((p) => p.family);
  }

  of(family: Family): FamilyPlane | undefined {
    return this.#planes.find((p) => p.family === family);
  }

  setLease(lease: Lease): void {
    this.#planes = withLease(this.#initial, lease);
  }
}

/** What a backend adds to the skeleton. */
export interface BackendDriver {
  /**
   * flannel's BackendType: published in the lease, and the only type of peer lease programmed
   * (others are ignored quietly, as flannel does). Undefined for udp, which publishes none and
   * takes every lease.
   */
  readonly type?: string;
  /** FLANNEL_MTU. */
  readonly mtu: number;
  /** The kinds of entry it manages, in write order (entry-kind.ts). */
  readonly kinds: readonly EntryKind[];
  /** What it publishes as BackendData (IPv4) or BackendV6Data, if anything. */
  backendData?(family: Family): string | undefined;
  /** The entries one family of a peer lease asks for, after that family passed the peer check; or why not. */
  programFamily(lease: Lease, plane: FamilyPlane): Program | Refusal;
  /** Entries the node wants whatever its peers. */
  own?(): Program;
  /** Gives the node's devices their lease (address, up); called once acquired and on every change. */
  configure(signal: AbortSignal): Promise<void>;
  /** Puts back what was taken from its devices; true when one was made anew (programs name devices by index). */
  repairDevices?(signal: AbortSignal): Promise<boolean>;
  /** Links whose changes can undo its entries unannounced: its devices and the external interface. */
  links(): readonly number[];
  /**
   * Once the reconciler has stopped: release or hand over what the next agent takes. `run`
   * resolves only after it, so that what it finishes (a file still being written) is done before
   * the process exits or re-executes.
   */
  stop?(): void | Promise<void>;
  /** A packet path's counters. */
  packetCounters?(): PacketCounters;
}

export interface OverlayOptions {
  readonly netlink: Pick<Netlink, 'subscribe'>;
  readonly log: Logger;
  readonly clock?: Clock;
}

/** The Network of a backend: the skeleton around its driver. */
export class OverlayNetwork implements Network {
  readonly #driver: BackendDriver;
  readonly #planes: PlaneSet;
  readonly #options: OverlayOptions;
  #reconciler: Reconciler | undefined;

  constructor(driver: BackendDriver, planes: PlaneSet, options: OverlayOptions) {
    this.#driver = driver;
    this.#planes = planes;
    this.#options = options;
  }

  get mtu(): number {
    return this.#driver.mtu;
  }

  get attrs(): LeaseAttrs {
    const d = this.#driver;
    const v4 = this.#planes.of(4);
    const v6 = this.#planes.of(6);
    const backendData = v4 ? d.backendData?.(4) : undefined;
    const backendV6Data = v6 ? d.backendData?.(6) : undefined;
    return {
      ...(v4 ? { publicIp: v4.publicIp } : {}),
      ...(v6 ? { publicIpv6: v6.publicIp } : {}),
      ...(d.type !== undefined ? { backendType: d.type } : {}),
      ...(backendData ? { backendData } : {}),
      ...(backendV6Data ? { backendV6Data } : {}),
    };
  }

  async setLease(lease: Lease, signal: AbortSignal): Promise<void> {
    this.#planes.setLease(lease);
    await this.#driver.configure(signal);
    // What a peer may have depends on this node's subnet (a peer overlapping it is refused).
    await this.#reconciler?.refresh(signal);
  }

  peers(): readonly PeerStatus[] {
    return this.#reconciler?.status() ?? [];
  }

  packetCounters(): PacketCounters | undefined {
    return this.#driver.packetCounters?.();
  }

  async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    const d = this.#driver;
    const planes = this.#planes;
    const reconciler = new Reconciler({
      netlink: this.#options.netlink,
      log: this.#options.log,
      ...(this.#options.clock ? { clock: this.#options.clock } : {}),
      scope: {
        kinds: d.kinds,
        families: planes.families,
        program: (lease) => {
          if (d.type !== undefined && lease.attrs.backendType !== d.type) return null;
          return programFamilies(lease, planes.all, (l, plane) => d.programFamily(l, plane));
        },
        ...(d.own ? { own: () => d.own!() } : {}),
        ...(d.repairDevices ? { repairDevices: (s: AbortSignal) => d.repairDevices!(s) } : {}),
        links: () => d.links(),
      },
    });
    this.#reconciler = reconciler;
    try {
      await reconciler.run(events, signal);
    } finally {
      await d.stop?.();
    }
  }
}
