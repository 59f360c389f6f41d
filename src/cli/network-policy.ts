/**
 * NetworkPolicy in the agent (`--network-policy`, kube mode only): three informers over the
 * agent's one connection to the API server (every Pod, for peer selectors; Namespaces;
 * NetworkPolicies), the policy engine fed by them, and an nftables owner of its own for the
 * engine's table. Off by default: turning enforcement on in a cluster whose policies were never
 * enforced can cut traffic that applications rely on, so `dry-run` exists to see that first.
 */
import type { Logger } from '../core/log.js';
import { Informer, type RecordDecoder } from '../kube/informer.js';
import type { ResourceApi } from '../kube/kube-client.js';
import { policyTable } from '../policy/nft-render.js';
import { type PolicyMode, PolicyEngine, type PolicyStatus } from '../policy/policy-engine.js';
import { type NamespaceRecord, type PodRecord, type PolicyRecord, type RefusedPolicy, decodeNamespace, decodePod, decodePolicy } from '../policy/records.js';
import { type Exec, execCommand } from '../traffic/exec.js';
import { NftOwner } from '../traffic/nft-owner.js';
import { PolicyHookServer } from './policy-socket.js';

export { type NetworkPolicySetting, parseNetworkPolicySetting } from './network-policy-setting.js';

export const podsPath = '/api/v1/pods';
const podsPathIn = (namespace: string): string => `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
export const namespacesPath = '/api/v1/namespaces';
export const networkPoliciesPath = '/apis/networking.k8s.io/v1/networkpolicies';

/** Records hold IPs as bigints, which JSON cannot write as they are. */
const text = (record: unknown): string => JSON.stringify(record, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
const namespaced = (r: { namespace: string; name: string }): string => `${r.namespace}/${r.name}`;

const podDecoder: RecordDecoder<PodRecord> = { record: decodePod, key: namespaced, same: (a, b) => text(a) === text(b) };
const namespaceDecoder: RecordDecoder<NamespaceRecord> = { record: decodeNamespace, key: (n) => n.name, same: (a, b) => text(a) === text(b) };
const policyDecoder: RecordDecoder<PolicyRecord | RefusedPolicy> = { record: decodePolicy, key: namespaced, same: (a, b) => text(a) === text(b) };

export interface NetworkPolicyAgentOptions {
  readonly api: ResourceApi & { get(path: string, signal: AbortSignal): Promise<Record<string, unknown>> };
  /** The CNI plugin's hook lives beside it (policy-socket.ts). */
  readonly subnetFile: string;
  readonly mode: PolicyMode;
  /** This node's name (the Node object's), once known. */
  readonly nodeName: (signal: AbortSignal) => Promise<string>;
  readonly log: Logger;
  readonly exec?: Exec;
  /** The drift check's period, and how often the counters are read: `--iptables-resync`, as for flannel's rules. */
  readonly checkMs: number;
}

export interface NetworkPolicyAgent {
  /** Until `signal` aborts: lists and watches, compiles and keeps the table. Rejects only with what no retry mends. */
  run(signal: AbortSignal): Promise<void>;
  /** Undefined until the node's name is known and the engine runs. */
  status(): PolicyStatus | undefined;
}

export function networkPolicyAgent(options: NetworkPolicyAgentOptions): NetworkPolicyAgent {
  const { api, log } = options;
  const pods = new Informer({ api, path: podsPath, decoder: podDecoder, what: 'pod', log: log.child({ informer: 'pods' }) });
  const namespaces = new Informer({ api, path: namespacesPath, decoder: namespaceDecoder, what: 'namespace', log: log.child({ informer: 'namespaces' }) });
  const policies = new Informer({ api, path: networkPoliciesPath, decoder: policyDecoder, what: 'networkpolicy', log: log.child({ informer: 'networkpolicies' }) });
  const owner = new NftOwner({ exec: options.exec ?? execCommand, log });
  let engine: PolicyEngine | undefined;
  return {
    status: () => engine?.status(),
    async run(signal) {
      const follow = async (): Promise<void> => {
        const node = await options.nodeName(signal);
        engine = new PolicyEngine({
          node,
          mode: options.mode,
          pods: pods.changes(signal),
          namespaces: namespaces.changes(signal),
          policies: policies.changes(signal),
          tables: { install: (t) => owner.update(t), check: () => owner.check(), listed: (t) => owner.listed(t) },
          log,
          checkMs: options.checkMs,
        });
        log.info({ node, mode: options.mode }, options.mode === 'enforce' ? 'NetworkPolicy enforced on this node\'s pods' : 'NetworkPolicy in a dry run: what it would reject is counted and logged, and let through');
        const running = engine;
        const hook = new PolicyHookServer({
          subnetFile: options.subnetFile,
          mode: options.mode,
          log,
          handler: {
            add: async (pod, s) => {
              const key = `${pod.namespace}/${pod.name}`;
              // The informer has it unless its watch lags the pod's creation; then one GET.
              const record = pods.get(key) ?? decodePod(await api.get(`${podsPathIn(pod.namespace)}/${encodeURIComponent(pod.name)}`, AbortSignal.any([s, AbortSignal.timeout(5000)])));
              if (!record) throw new Error(`the API server has no pod ${key}`);
              await running.admitLocalPod({ ...record, node, ips: pod.ips });
            },
            del: (pod) => running.forgetLocalPod(pod),
          },
        });
        await Promise.all([running.run(signal), hook.run(signal)]);
      };
      // The table stays when the agent stops: the next agent replaces it in one transaction, and
      // in between the pods stay as isolated as they were (nothing fails open).
      await Promise.all([pods.run(signal), namespaces.run(signal), policies.run(signal), follow()]);
    },
  };
}

/**
 * With `--network-policy=off`: the table an earlier agent left (it was on then) goes, so that
 * turning enforcement off takes effect. Quietly nothing where nft is missing or there is no table.
 */
export async function removeLeftoverPolicyTable(log: Logger, exec: Exec = execCommand): Promise<void> {
  try {
    await exec('nft', ['list', 'table', policyTable.family, policyTable.name]);
  } catch {
    return;
  }
  await new NftOwner({ exec, log }).remove([policyTable]);
  log.info({ table: `${policyTable.family} ${policyTable.name}` }, 'NetworkPolicy is off: removed the table an earlier agent left');
}
