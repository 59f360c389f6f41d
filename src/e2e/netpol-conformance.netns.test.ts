/**
 * The conformance cases (testing/netpol-cases.ts, after the upstream suite) on the upstream
 * topology for real: namespaces x, y, z with pods a, b, c spread over two nodes, every policy
 * case applied in turn through the API server, and the reachability of every ordered pod pair on
 * 80 and 81, TCP and UDP, compared with what the specification's model (policy/model.ts)
 * says of the same pods. The kernel, not the compiler's data, is what is checked here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseIp } from '../ip/ip.js';
import { type World, allowed, endpointOf } from '../policy/model.js';
import { decodeNamespace, decodePod, decodePolicy, isRefused } from '../policy/records.js';
import type { PolicyRecord } from '../policy/records.js';
import type { ClusterNode } from '../testing/cluster.js';
import { netnsSkipReason } from '../testing/netns.js';
import { conformanceCases } from '../testing/netpol-cases.js';
import { namespaces, nodeOf, podNames } from '../testing/netpol-topology.js';
import { waitUntil } from '../testing/wait.js';
import { type NetPod, type PolicyCluster, expectMatrix, id, podObject, startPolicyCluster, status } from './netpol-scenarios.js';

const skip = netnsSkipReason();

/** The model's world for the pods the test made, with these policies. */
function modelWorld(pods: readonly NetPod[], policies: readonly unknown[], nodes: readonly ClusterNode[]): World {
  return {
    pods: pods.map((p) => decodePod(podObject(p, { pod: p.name }))!),
    namespaces: namespaces.map((ns) => decodeNamespace({ metadata: { name: ns, labels: { ns } } })!),
    policies: policies.map((p) => decodePolicy(p)!).filter((p): p is PolicyRecord => !isRefused(p)),
    nodes: new Map(nodes.map((n) => [n.name, [parseIp(n.ip)]])),
  };
}

/** Makes the API's policies exactly a case's, and waits until both agents have them in the kernel. */
function caseStepper(api: PolicyCluster['api'], cluster: PolicyCluster['cluster']): (name: string, policies: readonly unknown[]) => Promise<void> {
  let applied: Array<{ ns: string; name: string }> = [];
  return async (name, policies) => {
    const objects = policies.map((p) => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', ...(p as Record<string, unknown>) }) as unknown as { metadata: { namespace: string; name: string } });
    for (const old of applied) if (!objects.some((o) => o.metadata.namespace === old.ns && o.metadata.name === old.name)) await api.remove('NetworkPolicy', old.ns, old.name);
    for (const o of objects) await api.apply(o);
    applied = objects.map((o) => ({ ns: o.metadata.namespace, name: o.metadata.name }));
    await waitUntil(`${name}: both agents programmed ${objects.length} policies`, async () => {
      for (const n of cluster.nodes) {
        const p = (await status(cluster, n)).policy;
        if (p?.policies !== objects.length || !p.programmed) return false;
      }
      return true;
    }, 20_000);
  };
}

test('the conformance cases on two nodes: every pod pair, TCP and UDP on 80 and 81, as the model says', { skip, timeout: 900_000 }, async (t) => {
  const layout = namespaces.flatMap((ns) => podNames.map((name) => [ns, name, nodeOf(ns, name) === 'node1' ? 1 : 2] as const));
  const { api, pods, cluster } = await startPolicyCluster(t, 'enforce', layout);
  const ipOf = (ns: string, name: string): string => pods.find((p) => p.ns === ns && p.name === name)!.pod.ip;
  const step = caseStepper(api, cluster);
  for (const [name, policies] of Object.entries(conformanceCases(ipOf))) {
    await step(name, policies);
    const w = modelWorld(pods, policies, cluster.nodes);
    const model = (from: NetPod, to: NetPod, port: number, proto: 'TCP' | 'UDP'): boolean => allowed(w, endpointOf(w, parseIp(from.pod.ip)), endpointOf(w, parseIp(to.pod.ip)), port, proto);
    await expectMatrix(name, pods, model, ['TCP', 'UDP']);
  }
});

test('the conformance cases as a dry run: nothing is refused, and the pairs counted are exactly those enforcement would refuse', { skip, timeout: 900_000 }, async (t) => {
  const layout = namespaces.flatMap((ns) => podNames.map((name) => [ns, name, nodeOf(ns, name) === 'node1' ? 1 : 2] as const));
  const { api, pods, cluster } = await startPolicyCluster(t, 'dry-run', layout);
  const ipOf = (ns: string, name: string): string => pods.find((p) => p.ns === ns && p.name === name)!.pod.ip;
  const byIp = new Map(pods.map((p) => [p.pod.ip, id(p)]));
  /** Every pair either node counted, with its packets (a pair may be counted at both ends). */
  const counted = async (): Promise<Map<string, number>> => {
    const out = new Map<string, number>();
    for (const n of cluster.nodes) {
      for (const d of (await status(cluster, n)).policy?.deniedPairs ?? []) {
        const k = `${byIp.get(d.from) ?? d.from}->${byIp.get(d.to) ?? d.to} ${d.direction}`;
        out.set(k, (out.get(k) ?? 0) + d.packets);
      }
    }
    return out;
  };
  const step = caseStepper(api, cluster);
  for (const [name, policies] of Object.entries(conformanceCases(ipOf))) {
    await step(name, policies);
    const w = modelWorld(pods, policies, cluster.nodes);
    // Which pod pairs the model refuses on some port and protocol: those a dry run must count.
    const refused = new Set<string>();
    for (const from of pods) for (const to of pods) for (const port of [80, 81]) for (const proto of ['TCP', 'UDP'] as const) {
      if (from !== to && !allowed(w, endpointOf(w, parseIp(from.pod.ip)), endpointOf(w, parseIp(to.pod.ip)), port, proto)) refused.add(`${id(from)}->${id(to)}`);
    }
    // One round of probes: all open, and what it adds to the counts is exactly the refused pairs.
    // The counts first settle: every node has read its counters since the last case's probes.
    const settledAfter = Date.now();
    await waitUntil(`${name}: the counters read since the last probes`, async () => {
      for (const n of cluster.nodes) if (((await status(cluster, n)).policy?.countedAt ?? 0) <= settledAfter) return false;
      return true;
    }, 30_000);
    const before = await counted();
    await expectMatrix(`${name}, dry run`, pods, () => true, ['TCP', 'UDP']);
    let grew = new Set<string>();
    await waitUntil(`${name}: the dry run counts the refused pairs`, async () => {
      const now = await counted();
      grew = new Set([...now].filter(([k, n]) => n > (before.get(k) ?? 0)).map(([k]) => k.split(' ')[0]!));
      return [...refused].every((k) => grew.has(k));
    }, 20_000).catch(() => undefined);
    assert.deepEqual([...grew].sort(), [...refused].sort(), name);
  }
});
