/**
 * `--network-policy`'s value, checked: apart from the engine (network-policy.ts) so that etcd mode,
 * which only refuses the flag, does not load the engine, its informers and its renderer.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { PolicyMode } from '../policy/policy-engine.js';

export type NetworkPolicySetting = 'off' | PolicyMode;

/** The flag's value, or a CONFIG error naming it. */
export function parseNetworkPolicySetting(value: string, kube: boolean): NetworkPolicySetting {
  if (value !== 'off' && value !== 'dry-run' && value !== 'enforce') {
    throw new WeftError(ErrorCodes.CONFIG, `--network-policy=${value}: expected off, dry-run or enforce`);
  }
  if (value !== 'off' && !kube) {
    throw new WeftError(ErrorCodes.CONFIG, `--network-policy=${value} needs --kube-subnet-mgr: NetworkPolicies, Pods and Namespaces live in the Kubernetes API, which etcd mode does not read`);
  }
  return value;
}
