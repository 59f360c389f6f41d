/**
 * flanneld 0.28 (main.go) refuses to start in iptables mode when br_netfilter is not loaded: since
 * Kubernetes 1.30 kubeadm no longer checks it, and without it traffic between pods of one node
 * through cni0 skips iptables (Services break for same-node pods). Same check, same words. Pure:
 * the caller says which paths exist.
 */
import type { NetworkConfig } from '../config/network-config.js';

export const brNetfilterFiles = { 4: '/proc/sys/net/bridge/bridge-nf-call-iptables', 6: '/proc/sys/net/bridge/bridge-nf-call-ip6tables' } as const;

/** flanneld's message for the first missing file, or undefined when the node is fine (or nftables mode). */
export function brNetfilterProblem(config: Pick<NetworkConfig, 'enableIPv4' | 'enableIPv6' | 'enableNFTables'>, exists: (path: string) => boolean): string | undefined {
  if (config.enableNFTables) return undefined;
  for (const [enabled, path] of [[config.enableIPv4, brNetfilterFiles[4]], [config.enableIPv6, brNetfilterFiles[6]]] as const) {
    if (enabled && !exists(path)) return `Failed to check br_netfilter: stat ${path}: no such file or directory (load the module: modprobe br_netfilter, and list it in /etc/modules-load.d)`;
  }
  return undefined;
}
