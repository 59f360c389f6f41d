/**
 * What backends and the agent see of lease management, whatever the registry (etcd or kube).
 */
import type { NetworkConfig } from '../config/network-config.js';
import type { IpAddr } from '../ip/ip.js';
import type { Lease, LeaseAttrs, LeaseEvent } from '../lease/lease.js';

export interface LeaseCheck {
  readonly held: boolean;
  /** When the registry last confirmed `held` (ms since the epoch). */
  readonly confirmedAt: number;
}

export interface SubnetManager {
  /**
   * The network config, validated. Waits (retrying each second, as flanneld) while the registry
   * has none or an invalid one; rejects only when `signal` aborts.
   */
  getNetworkConfig(signal: AbortSignal): Promise<NetworkConfig>;

  /** Obtains this node's lease, publishing `attrs`. Rejects with WEFT_ERR_OUT_OF_SUBNETS when full. */
  acquireLease(attrs: LeaseAttrs, signal: AbortSignal): Promise<Lease>;

  /**
   * Keeps the acquired lease: renews it before it expires and takes it back when it is lost
   * (expired, deleted, registry wiped), on the same subnet while that is free. Yields the lease
   * each time it changed: renewed (a new `expiresAt`), taken back, or moved to another subnet.
   * Runs until `signal` aborts, never revoking the lease.
   */
  holdLease(signal: AbortSignal): AsyncIterable<Lease>;

  /**
   * Other nodes' leases: first one batch with every current lease as `added` (possibly empty),
   * then each change. This node's own lease is never included.
   */
  watchLeases(signal: AbortSignal): AsyncIterable<LeaseEvent[]>;

  /**
   * Whether the registry holds this node's lease as published, and when it last confirmed that:
   * for the health endpoint. etcd mode asks etcd; kube mode answers from its Node informer, whose
   * watch is confirmation enough. Rejects when the registry cannot be reached.
   */
  checkLease(signal: AbortSignal): Promise<LeaseCheck>;

  /**
   * What this node published before (found by its public IP in etcd, or on its Node), so that a
   * backend can recreate its device as it was, e.g. the vxlan MAC after a reboot.
   */
  previousAttrs(publicIp: IpAddr, signal: AbortSignal): Promise<LeaseAttrs | undefined>;
}
