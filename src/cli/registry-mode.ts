/**
 * What the agent needs of a registry mode (etcd, or the Kubernetes API), as one named contract:
 * each mode is a factory that returns it (etcd-mode.ts, kube-mode.ts), and the agent knows no
 * mode by name. What a mode has no use for, it does as nothing, explicitly.
 */
import type { PolicyStatus } from '../policy/policy-engine.js';
import type { SubnetManager } from '../subnet/subnet-manager.js';

export interface RegistryMode {
  readonly kind: 'etcd' | 'kubernetes';
  /** Where the registry is, for logs and `weft status`: etcd's endpoints, or the API server. */
  readonly endpoints: readonly string[];
  readonly manager: SubnetManager;
  /**
   * Work the mode does for as long as the agent runs (kube: the Node informer, which everything
   * else reads); started first, so it lists while the agent looks for its interface. Resolves
   * when `signal` aborts; rejects only with a failure no retry mends.
   */
  run(signal: AbortSignal): Promise<void>;
  /**
   * Public addresses the registry assigns this node, which win over `--public-ip(v6)` (kube: the
   * node-public-ip annotations, flannel 0.28); etcd assigns none. Empty strings: none.
   */
  publicIpOverrides(signal: AbortSignal): Promise<{ readonly publicIp: string; readonly publicIpv6: string }>;
  /** Tells the registry that this node's network is up (kube: NodeNetworkUnavailable=False); retried until it lands. */
  networkUp(signal: AbortSignal): Promise<void>;
  /** Since when the registry's network config differs from the one this agent runs with (config-drift.ts), if it does. */
  configChangedAt(): number | undefined;
  /** Registry entries skipped as invalid now (etcd: keys under `subnets/`); kube mode reports refused Nodes as peers instead. */
  skippedEntries(): ReadonlyArray<{ readonly key: string; readonly reason: string; readonly since: number }>;
  /** NetworkPolicy on this node (kube mode with `--network-policy`): undefined when off or not started yet. */
  policy(): PolicyStatus | undefined;
  /** Releases the connection; after every task has ended. */
  close(): void;
}
