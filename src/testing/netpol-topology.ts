/**
 * The upstream NetworkPolicy conformance suite's topology (kubernetes/kubernetes
 * test/e2e/network/netpol): namespaces x, y, z labelled ns=<name>, pods a, b, c in each labelled
 * pod=<name>, serving TCP and UDP on 80 and 81 under the names serve-<port>-<proto>, spread over two
 * nodes; as records for the policy model's and compiler's unit tests.
 */
import assert from 'node:assert/strict';
import { parseIp } from '../ip/ip.js';
import type { World } from '../policy/model.js';
import { type PodRecord, type PolicyRecord, decodeNamespace, decodePod, decodePolicy, isRefused } from '../policy/records.js';

export const namespaces = ['x', 'y', 'z'];
export const podNames = ['a', 'b', 'c'];
export const ipOf = (ns: string, pod: string): string => `198.18.${namespaces.indexOf(ns) + 1}.${podNames.indexOf(pod) + 10}`;
export const nodeOf = (ns: string, pod: string): string => `node${((namespaces.indexOf(ns) + podNames.indexOf(pod)) % 2) + 1}`;
export const nodeIps = new Map([['node1', [parseIp('203.0.113.1')]], ['node2', [parseIp('203.0.113.2')]]]);
export const allPods = namespaces.flatMap((ns) => podNames.map((n) => `${ns}/${n}`));

export function topologyPod(ns: string, name: string, labels: Record<string, string> = {}): PodRecord {
  const ports = [80, 81].flatMap((port) => ['TCP', 'UDP'].map((protocol) => ({ name: `serve-${port}-${protocol.toLowerCase()}`, containerPort: port, protocol })));
  return decodePod({ metadata: { namespace: ns, name, labels: { pod: name, ...labels } }, spec: { nodeName: nodeOf(ns, name), containers: [{ ports }] }, status: { podIP: ipOf(ns, name) } })!;
}

export interface Relabel {
  readonly pods?: Readonly<Record<string, Record<string, string>>>;
  readonly namespaces?: Readonly<Record<string, Record<string, string>>>;
}

/** The topology with these policies (objects as the API server stores them), which must all be valid. */
export function topology(policies: readonly unknown[], relabel: Relabel = {}): World {
  const decoded = policies.map((p) => decodePolicy(p)!);
  for (const p of decoded) if (isRefused(p)) assert.fail(p.refused);
  return {
    pods: namespaces.flatMap((ns) => podNames.map((n) => topologyPod(ns, n, relabel.pods?.[`${ns}/${n}`]))),
    namespaces: namespaces.map((ns) => decodeNamespace({ metadata: { name: ns, labels: { ns, ...relabel.namespaces?.[ns] } } })!),
    policies: decoded as PolicyRecord[],
    nodes: nodeIps,
  };
}

export const netpol = (ns: string, name: string, spec: Record<string, unknown>): Record<string, unknown> => ({ metadata: { namespace: ns, name }, spec });
