/**
 * Backend contracts. A backend turns the network config into a Network: it prepares its device,
 * says what the node publishes (lease attributes, MTU), programs the device for the node's lease,
 * and keeps every peer programmed from lease events until told to stop. Every backend is a
 * BackendDriver inside the shared skeleton (overlay-network.ts).
 */
import type { Clock } from '../core/clock.js';
import type { FdHandover } from '../core/handover.js';
import type { Logger } from '../core/log.js';
import type { NetworkConfig } from '../config/network-config.js';
import type { Lease, LeaseAttrs, LeaseEvent } from '../lease/lease.js';
import type { Netlink } from '../netlink/netlink.js';
import type { WireGuardPort } from '../netlink/wireguard.js';
import type { ExternalInterface } from './external-interface.js';
import type { FamilyPlane } from './family-plane.js';
import type { KeyStore } from './key-store.js';
import type { PeerStatus } from './peer-report.js';

export interface BackendDeps {
  readonly netlink: Netlink;
  readonly log: Logger;
  readonly extIface: ExternalInterface;
  /** One per enabled family, IPv4 first (family-plane.ts). */
  readonly planes: readonly FamilyPlane[];
  /** Where a backend keeps key material across restarts (a WireGuard private key). */
  readonly keys: KeyStore;
  /** Where weft's own WireGuard devices serve their UAPI sockets, if not `wg`'s /var/run/wireguard. */
  readonly wireguardSocketDir?: string;
  /** The kernel's WireGuard port (generic netlink), if not the backend's own; tests give a fake. */
  readonly wireguard?: WireGuardPort;
  /** `userspace`: weft's own WireGuard even where the kernel has one (WEFT_WIREGUARD=userspace). */
  readonly wireguardPath?: 'userspace';
  /** What this node published in an earlier run, if the registry still has it. */
  readonly previous?: LeaseAttrs;
  /**
   * A file of the backend's own for what it must know across restarts without the registry (the
   * udp backend's forwarding table, udp-snapshot.ts); next to the subnet file.
   */
  readonly stateFile?: string;
  /** File descriptors from the agent this one replaced, and for the one that replaces it (SIGHUP). */
  readonly handover?: FdHandover;
  readonly clock?: Clock;
}

export interface Network {
  /** Attributes to publish in the lease, BackendType included. */
  readonly attrs: LeaseAttrs;
  /** FLANNEL_MTU. */
  readonly mtu: number;
  /** Programs the node's own side for `lease`; called once acquired and again when it changes. */
  setLease(lease: Lease, signal: AbortSignal): Promise<void>;
  /**
   * Programs peers from `events` (the first batch is the full initial set) and keeps the kernel
   * in that state, repairing drift as the kernel reports it, until `signal` aborts. Leaves
   * everything in place when it returns, so a restart changes nothing on the wire.
   */
  run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void>;
  /** The peers it knows and their state, for `weft status` (empty before `run`). */
  peers(): readonly PeerStatus[];
  /** A packet path's counters since start (udp, weft's WireGuard): packets by what became of them, bytes. */
  packetCounters(): PacketCounters | undefined;
}

/** The counters of a backend's packet path, which lives in native memory and is read when asked. */
export interface PacketCounters {
  readonly backend: 'udp' | 'wireguard';
  /** weft's own path, or the kernel's (which counts nothing weft can read). */
  readonly path: 'userspace' | 'kernel';
  readonly counters: Readonly<Record<string, number>>;
}

export interface BackendFactory {
  /** Parses the backend's options only; WEFT_ERR_CONFIG naming the bad one. */
  checkOptions(config: NetworkConfig): void;
  /** The names of the devices it makes for this config (flannel's names); the agent removes flannel's other devices (leftovers.ts). */
  deviceNames(config: NetworkConfig): readonly string[];
  /** Parses the backend's options and prepares its device; WEFT_ERR_CONFIG on bad options. */
  create(config: NetworkConfig, deps: BackendDeps, signal: AbortSignal): Promise<Network>;
}
