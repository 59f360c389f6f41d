/**
 * The conformance cases (testing/netpol-cases.ts, after the upstream suite) on the upstream
 * topology for real: namespaces x, y, z with pods a, b, c spread over two nodes, every policy
 * case applied in turn through the API server, and the reachability of every ordered pod pair on
 * 80 and 81, TCP and UDP, compared with what the specification's model (policy/model.ts)
 * says of the same pods. The kernel, not the compiler's data, is what is checked here.
 */
import { test } from 'node:test';
import { parseIp } from '../ip/ip.js';
import { type World, allowed, endpointOf } from '../policy/model.js';
import { decodeNamespace, decodePod, decodePolicy, isRefused } from '../policy/records.js';
import type { PolicyRecord } from '../policy/records.js';
import { netnsSkipReason } from '../testing/netns.js';
import { conformanceCases } from '../testing/netpol-cases.js';
import { namespaces, nodeOf, podNames } from '../testing/netpol-topology.js';
import { type NetPod, expectMatrix, podObject, startPolicyCluster } from './netpol-scenarios.js';

const skip = netnsSkipReason();

test('the conformance cases on two nodes: every pod pair, TCP and UDP on 80 and 81, as the model says', { skip, timeout: 900_000 }, async (t) => {
  const layout = namespaces.flatMap((ns) => podNames.map((name) => [ns, name, nodeOf(ns, name) === 'node1' ? 1 : 2] as const));
  const { api, pods, cluster } = await startPolicyCluster(t, 'enforce', layout);
  const ipOf = (ns: string, name: string): string => pods.find((p) => p.ns === ns && p.name === name)!.pod.ip;
  const world = (policies: readonly unknown[]): World => ({
    pods: pods.map((p) => decodePod(podObject(p, { pod: p.name }))!),
    namespaces: namespaces.map((ns) => decodeNamespace({ metadata: { name: ns, labels: { ns } } })!),
    policies: policies.map((p) => decodePolicy(p)!).filter((p): p is PolicyRecord => !isRefused(p)),
    nodes: new Map(cluster.nodes.map((n) => [n.name, [parseIp(n.ip)]])),
  });
  let applied: Array<{ ns: string; name: string }> = [];
  for (const [name, policies] of Object.entries(conformanceCases(ipOf))) {
    const objects = policies.map((p) => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', ...(p as Record<string, unknown>) }) as unknown as { metadata: { namespace: string; name: string } });
    for (const old of applied) if (!objects.some((o) => o.metadata.namespace === old.ns && o.metadata.name === old.name)) await api.remove('NetworkPolicy', old.ns, old.name);
    for (const o of objects) await api.apply(o);
    applied = objects.map((o) => ({ ns: o.metadata.namespace, name: o.metadata.name }));
    const w = world(policies);
    const model = (from: NetPod, to: NetPod, port: number, proto: 'TCP' | 'UDP'): boolean => allowed(w, endpointOf(w, parseIp(from.pod.ip)), endpointOf(w, parseIp(to.pod.ip)), port, proto);
    await expectMatrix(name, pods, model, ['TCP', 'UDP']);
  }
});
