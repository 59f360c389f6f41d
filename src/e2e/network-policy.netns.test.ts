/**
 * NetworkPolicy end to end, in kube mode: two nodes, pods made by the CNI plugin as a runtime
 * makes them, their Pod objects, Namespaces and NetworkPolicies in the in-test API server, and
 * real TCP connections between the pods on the upstream conformance tests' ports (80 and 81,
 * named `serve-<port>-tcp`), same node and across nodes. Each step states the whole reachability
 * matrix it expects and waits until the cluster shows it, naming every pair that differs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { Cluster, type ClusterNode, type Pod } from '../testing/cluster.js';
import { netnsSkipReason, nsExec, spawnInNetns, stopProcess } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';

const skip = netnsSkipReason();
const config = JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'vxlan' } });
const ports = [80, 81] as const;
const health = ['--healthz-ip=127.0.0.1', '--healthz-port=8471'];

/** A pod of the test: its namespace and name in the API, and where it runs. */
interface NetPod {
  readonly ns: string;
  readonly name: string;
  readonly node: ClusterNode;
  readonly pod: Pod;
}
const id = (p: NetPod): string => `${p.ns}/${p.name}`;

const serverScript = `import { createServer } from 'node:net';
// Probes close at once: a reset connection is no reason to stop serving.
for (const port of [80, 81]) createServer((s) => { s.on('error', () => {}); s.end('ok'); }).listen(port, '0.0.0.0');`;

/** Connects to every target at once; prints one line of JSON: target → open, refused or silent. */
const probeScript = `import { connect } from 'node:net';
const targets = JSON.parse(process.argv[1]);
const one = ([ip, port]) => new Promise((resolve) => {
  const s = connect({ host: ip, port, timeout: 3000 });
  s.on('connect', () => { s.destroy(); resolve('open'); });
  s.on('timeout', () => { s.destroy(); resolve('silent'); });
  s.on('error', (e) => resolve(e.code === 'ECONNREFUSED' ? 'refused' : e.code));
});
const out = await Promise.all(targets.map(one));
process.stdout.write(JSON.stringify(out));`;

/** Whether `from` reaches `to` on `port`, for every ordered pair of distinct pods. */
type Expect = (from: NetPod, to: NetPod, port: number) => boolean;

async function matrix(pods: readonly NetPod[]): Promise<Map<string, string>> {
  const seen = new Map<string, string>();
  await Promise.all(
    pods.map(async (from) => {
      const targets = pods.filter((to) => to !== from).flatMap((to) => ports.map((port) => ({ to, port })));
      const out = JSON.parse(await nsExec(from.pod.ns, process.execPath, ['--input-type=module', '-e', probeScript, JSON.stringify(targets.map((t) => [t.to.pod.ip, t.port]))])) as string[];
      targets.forEach((t, i) => seen.set(`${id(from)}->${id(t.to)}:${t.port}`, out[i]!));
    }),
  );
  return seen;
}

/** Waits until every pair connects or is refused as `expect` says; a denied connection is reset, never left silent. */
async function expectMatrix(step: string, pods: readonly NetPod[], expect: Expect): Promise<void> {
  let wrong: string[] = [];
  await waitUntil(`${step}: the reachability matrix`, async () => {
    const seen = await matrix(pods);
    wrong = [];
    for (const from of pods) {
      for (const to of pods) {
        if (from === to) continue;
        for (const port of ports) {
          const key = `${id(from)}->${id(to)}:${port}`;
          const want = expect(from, to, port) ? 'open' : 'refused';
          if (seen.get(key) !== want) wrong.push(`${key} ${seen.get(key)} (want ${want})`);
        }
      }
    }
    return wrong.length === 0;
  }, 30_000).catch(async (err: unknown) => {
    // What CI keeps of a failure: each node's policy table.
    const tables = await Promise.all([...new Set(pods.map((p) => p.node))].map(async (n) => `${n.name}: ${await nsExec(n.ns, 'nft', ['list', 'table', 'inet', 'weft-policy']).catch((e: unknown) => String(e))}`));
    throw new Error(`${step}: ${wrong.length} pairs differ: ${wrong.join('; ')}\n${tables.join('\n')}`, { cause: err });
  });
}

const podObject = (p: NetPod, labels: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace: p.ns, name: p.name, labels },
  spec: { nodeName: p.node.name, containers: [{ name: 'c', ports: ports.map((port) => ({ name: `serve-${port}-tcp`, containerPort: port, protocol: 'TCP' })) }] },
  status: { phase: 'Running', podIP: p.pod.ip, podIPs: p.pod.ips.map((ip) => ({ ip })) },
});
const namespaceObject = (name: string, labels: Record<string, string>) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
const policyObject = (ns: string, name: string, spec: Record<string, unknown>) => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: ns, name }, spec });

/** A kube-mode cluster of two nodes with pods x/a, y/a on node1 and x/b, y/b on node2, each serving 80 and 81. */
async function startPolicyCluster(t: { after(fn: () => Promise<void>): void; readonly passed?: boolean }, mode: 'enforce' | 'dry-run') {
  const cluster = await Cluster.create({ nodes: 2, config, kube: { podCidr: (n) => `198.18.${n * 10}.0/24` }, agentFlags: ['--ip-masq', `--network-policy=${mode}`, ...health] });
  const servers: ChildProcess[] = [];
  cluster.destroyAfter(t, async () => {
    for (const s of servers) await stopProcess(s, 'SIGKILL').catch(() => undefined);
  });
  const api = cluster.api!;
  for (const ns of ['x', 'y']) await api.apply(namespaceObject(ns, { ns }));
  for (const node of cluster.nodes) cluster.startAgent(node);
  await waitUntil('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 30_000);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  const pods: NetPod[] = [];
  for (const [ns, name, node] of [['x', 'a', n1], ['x', 'b', n2], ['y', 'a', n1], ['y', 'b', n2]] as const) {
    const p: NetPod = { ns, name, node, pod: await cluster.addPod(node) };
    pods.push(p);
    const server = spawnInNetns(p.pod.ns, process.execPath, ['--input-type=module', '-e', serverScript]);
    servers.push(server);
    // Serving before any probe: a refusal must mean a policy, never a server still starting.
    let failed = '';
    server.stderr?.on('data', (d: Buffer) => (failed += d.toString()));
    await waitUntil(`${ns}/${name} serves`, async () => {
      if (server.exitCode !== null) throw new Error(`the server of ${ns}/${name} ended: ${failed}`);
      return (await nsExec(p.pod.ns, process.execPath, ['--input-type=module', '-e', probeScript, JSON.stringify([[p.pod.ip, 80], [p.pod.ip, 81]])])) === '["open","open"]';
    }, 10_000);
    await api.apply(podObject(p, { pod: name }));
  }
  return { cluster, api, pods, n1, n2 };
}

async function status(cluster: Cluster, node: ClusterNode): Promise<{ policy?: { mode: string; policies: number; pods: Array<{ pod: string }>; denied: Array<{ pod: string; direction: string; packets: number }>; deniedPairs: Array<{ from: string; to: string; direction: string; packets: number }> } }> {
  return (await cluster.health(node, 8471, '/status')).body as never;
}

async function metrics(node: ClusterNode): Promise<string> {
  return nsExec(node.ns, process.execPath, ['--input-type=module', '-e', `process.stdout.write(await (await fetch('http://127.0.0.1:8471/metrics')).text())`]);
}

test('NetworkPolicy enforced: isolation per direction, peers by namespace and pod, named ports, egress with replies, same node and across, and no opening while the agent is down', { skip, timeout: 300_000 }, async (t) => {
  const { cluster, api, pods, n1 } = await startPolicyCluster(t, 'enforce');
  const [xa, , ya] = pods as [NetPod, NetPod, NetPod, NetPod];
  await expectMatrix('no policy', pods, () => true);

  await api.apply(policyObject('x', 'deny-all', { podSelector: {} }));
  await expectMatrix('x denies all ingress', pods, (_f, to) => to.ns !== 'x');
  // The node itself always reaches its pods (kubelet's probes).
  assert.match(await nsExec(n1.ns, process.execPath, ['--input-type=module', '-e', probeScript, JSON.stringify([[xa.pod.ip, 80]])]), /"open"/, 'node1 reaches x/a');

  await api.apply(policyObject('x', 'allow-y-80', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 'serve-80-tcp' }] }] }));
  const step2: Expect = (f, to, port) => to.ns !== 'x' || (to === xa && f.ns === 'y' && port === 80);
  await expectMatrix('x/a lets y in on serve-80-tcp', pods, step2);

  // Egress from y only to namespace x: y's pods lose each other; replies to x's connections still go.
  await api.apply(policyObject('y', 'egress-to-x', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'x' } } }] }] }));
  const step3: Expect = (f, to, port) => step2(f, to, port) && !(f.ns === 'y' && to.ns === 'y');
  await expectMatrix('y may send only to x', pods, step3);

  // Namespace y relabelled: allow-y-80 no longer selects it.
  await api.apply(namespaceObject('y', { ns: 'w' }));
  await expectMatrix('y relabelled', pods, (f, to, port) => step3(f, to, port) && to.ns !== 'x');
  await api.apply(namespaceObject('y', { ns: 'y' }));
  await expectMatrix('y labelled back', pods, step3);

  const s = await status(cluster, n1);
  assert.equal(s.policy?.mode, 'enforce');
  assert.equal(s.policy?.policies, 3);
  assert.deepEqual(s.policy?.pods.map((p) => p.pod).sort(), ['x/a', 'y/a'], 'node1\'s isolated pods');
  await waitUntil('node1 counts what it rejected for x/a', async () => (await status(cluster, n1)).policy?.denied.some((d) => d.pod === 'x/a' && d.direction === 'ingress' && d.packets > 0) ?? false, 20_000);
  assert.match(await metrics(n1), /weft_policy_denied_packets_total\{pod="x\/a",direction="ingress",mode="enforce"\} [1-9]/);

  // The agent killed: its table stays, and nothing opens until the next agent replaces it.
  await cluster.stopAgent(n1, 'SIGKILL');
  await expectMatrix('node1\'s agent down', pods, step3);
  cluster.startAgent(n1);
  await api.remove('NetworkPolicy', 'x', 'deny-all');
  await api.remove('NetworkPolicy', 'x', 'allow-y-80');
  await api.remove('NetworkPolicy', 'y', 'egress-to-x');
  await expectMatrix('every policy deleted', pods, () => true);
  assert.equal(ya.ns, 'y');
});

test('NetworkPolicy as a dry run: nothing is rejected, and what would be is counted per pod and per pod pair', { skip, timeout: 240_000 }, async (t) => {
  const { cluster, api, pods, n1 } = await startPolicyCluster(t, 'dry-run');
  await api.apply(policyObject('x', 'deny-all', { podSelector: {} }));
  await waitUntil('node1 installed its table', async () => (await status(cluster, n1)).policy?.pods.length === 1, 20_000);
  await expectMatrix('a dry run rejects nothing', pods, () => true);
  await waitUntil('node1 counts what it would have rejected', async () => {
    const p = (await status(cluster, n1)).policy;
    return (p?.denied.some((d) => d.pod === 'x/a' && d.direction === 'ingress' && d.packets > 0) ?? false) && (p?.deniedPairs.some((d) => d.from === 'y/a' && d.to === 'x/a' && d.direction === 'ingress') ?? false);
  }, 30_000);
  const p = (await status(cluster, n1)).policy!;
  assert.equal(p.mode, 'dry-run');
  assert.ok(p.deniedPairs.every((d) => d.to === 'x/a'), `only x/a is isolated on node1: ${JSON.stringify(p.deniedPairs)}`);
  assert.ok(p.deniedPairs.some((d) => d.from === 'y/b'), 'a pod of the other node is named too');
  assert.match(await metrics(n1), /weft_policy_denied_packets_total\{pod="x\/a",direction="ingress",mode="dry-run"\} [1-9]/);
  assert.match(await metrics(n1), /weft_policy_mode\{mode="dry-run"\} 1/);
});

test('a new pod a policy selects is isolated from its first packet: the CNI ADD returns only once its chains are in', { skip, timeout: 240_000 }, async (t) => {
  const { cluster, api, pods, n1 } = await startPolicyCluster(t, 'enforce');
  await api.apply(policyObject('x', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }));
  await expectMatrix('x isolated both ways', pods, (f, to) => f.ns !== 'x' && to.ns !== 'x');
  // Created in the API as the scheduler leaves it: no address yet (the kubelet reports it later).
  const fresh = { ns: 'x', name: 'fresh', node: n1 } as const;
  await api.apply({ ...podObject({ ...fresh, pod: { ns: '', ip: '', ips: [], id: '' } }, { pod: 'fresh' }), status: { phase: 'Pending' } });
  const pod = await cluster.addPod(n1, { namespace: 'x', name: 'fresh' });
  const server = spawnInNetns(pod.ns, process.execPath, ['--input-type=module', '-e', serverScript]);
  t.after(() => stopProcess(server, 'SIGKILL').catch(() => undefined));
  const ya = pods.find((p) => p.ns === 'y' && p.name === 'a')!;
  // At once, with no waiting: the pod cannot send, and its egress is refused before its server is even up.
  const out = JSON.parse(await nsExec(pod.ns, process.execPath, ['--input-type=module', '-e', probeScript, JSON.stringify([[ya.pod.ip, 80], [ya.pod.ip, 81]])])) as string[];
  assert.deepEqual(out, ['refused', 'refused'], 'x/fresh sends nothing');
  // A pod reaches itself (its server up), and nothing else reaches it (refused by the policy, not by a missing server).
  await waitUntil('x/fresh serves', async () => (await nsExec(pod.ns, process.execPath, ['--input-type=module', '-e', probeScript, JSON.stringify([[pod.ip, 80]])])).includes('"open"'), 10_000);
  assert.equal((await matrix([...pods, { ...fresh, pod }])).get('y/a->x/fresh:80'), 'refused', 'nothing reaches it');
  const s = await status(cluster, n1);
  assert.ok(s.policy?.pods.some((p) => p.pod === 'x/fresh'), 'isolated with the address the CNI plugin gave it');
});
