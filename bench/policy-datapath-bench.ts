/**
 * `make bench`, NetworkPolicy against the data path and the agent (needs root): two kube-mode
 * clusters side by side in one run, one enforcing NetworkPolicy and one with it off, each of two
 * nodes with a pod on each, the same 5000 Pods (BENCH_POLICY_PODS) and 1000 NetworkPolicies in
 * its API server, and in the enforcing one a policy that isolates the measured pods and allows
 * the measured traffic (so every new connection goes through both pods' chains):
 * - pod-to-pod TCP throughput across nodes (iperf3), alternating between the clusters;
 * - new connections: the median time of a TCP connect, one after another (the first packet of
 *   each goes through the chains; kube-network-policies quotes 80-170 µs for its first packet);
 * - the agents' memory 10 s after they programmed (RssAnon and RssFile apart, and the peak).
 */
import { readFile } from 'node:fs/promises';
import { type NetPod, policyObject, startPolicyCluster } from '../src/e2e/netpol-scenarios.js';
import { netnsSkipReason, nsExec } from '../src/testing/netns.js';
import { waitUntil } from '../src/testing/wait.js';
import { iperf, median } from './iperf.js';

const say = (line = ''): void => void process.stdout.write(line + '\n');
const reps = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 3));
const podCount = Number(process.env['BENCH_POLICY_PODS'] ?? 5000);
const policyCount = Number(process.env['BENCH_POLICY_POLICIES'] ?? 1000);

interface Memory {
  readonly anon: number;
  readonly file: number;
  readonly peak: number;
}

async function memory(pid: number): Promise<Memory> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const mb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0) / 1024;
  return { anon: mb('RssAnon'), file: mb('RssFile'), peak: mb('VmHWM') };
}

/** Connects one after another; the median microseconds from connect() to the connection. */
const connectScript = `import { connect } from 'node:net';
const [ip, n] = [process.argv[1], Number(process.argv[2])];
const times = [];
for (let i = 0; i < n; i++) {
  const t0 = process.hrtime.bigint();
  await new Promise((resolve, reject) => { const s = connect({ host: ip, port: 80 }); s.on('connect', () => { s.destroy(); resolve(); }); s.on('error', reject); });
  times.push(Number(process.hrtime.bigint() - t0) / 1000);
}
times.sort((a, b) => a - b);
process.stdout.write(String(times[Math.floor(times.length / 2)]));`;

async function connectUs(from: NetPod, to: NetPod): Promise<number> {
  return Number(await nsExec(from.pod.ns, process.execPath, ['--input-type=module', '-e', connectScript, to.pod.ip, '500']));
}

/** The same 5000 Pods (on nodes that do not exist) and 1000 policies in both API servers: what the informers and the compiler carry. */
async function populate(api: Awaited<ReturnType<typeof startPolicyCluster>>['api']): Promise<void> {
  for (let n = 0; n < 50; n++) await api.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `ns${n}`, labels: { team: `t${n % 5}` } } });
  for (let i = 0; i < podCount; i++) {
    const ip = `198.19.${Math.floor(i / 250)}.${(i % 250) + 2}`;
    await api.apply({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { namespace: `ns${i % 50}`, name: `pod-${i}`, labels: { app: ['frontend', 'backend', 'db', 'cache', 'worker'][i % 5]!, shard: `s${i % 7}` } },
      spec: { nodeName: `elsewhere-${i % 100}`, containers: [{ name: 'c', ports: [{ name: 'http', containerPort: 8080 }] }] },
      status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
    });
  }
  for (let i = 0; i < policyCount; i++) {
    const n = i % 50;
    await api.apply(policyObject(`ns${n}`, `p-${i}`, { podSelector: { matchLabels: { shard: `s${i % 7}` } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: `t${i % 5}` } }, podSelector: { matchLabels: { app: 'frontend' } } }], ports: [{ port: 'http' }] }] }));
  }
}

async function main(): Promise<void> {
  const skip = netnsSkipReason();
  if (skip) {
    say(`policy data-path bench skipped: ${skip}`);
    return;
  }
  const cleanups: Array<() => Promise<void>> = [];
  const t = { after: (fn: () => Promise<void>) => void cleanups.push(fn) };
  try {
    const layout = [['x', 'a', 1], ['x', 'b', 2]] as const;
    const on = await startPolicyCluster(t, 'enforce', layout);
    const off = await startPolicyCluster(t, 'off', layout);
    // x/b isolated, letting x/a in on every port (iperf3's 5201, the connect test's 80).
    await on.api.apply(policyObject('x', 'let-a-in', { podSelector: { matchLabels: { pod: 'b' } }, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'a' } } }] }] }));
    await on.api.apply(policyObject('x', 'a-sends-to-b', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{ to: [{ podSelector: { matchLabels: { pod: 'b' } } }] }] }));
    for (const c of [on, off]) await populate(c.api);
    await waitUntil('the enforcing agents programmed every policy', async () => {
      for (const n of on.cluster.nodes) {
        const s = (await on.cluster.health(n, 8471, '/status')).body as { policy?: { policies: number; programmed: boolean } };
        if (s.policy?.policies !== policyCount + 2 || !s.policy.programmed) return false;
      }
      return true;
    }, 120_000);
    await new Promise((r) => setTimeout(r, 10_000));
    const mem = { on: await memory(on.cluster.nodes[0]!.agent!.pid!), off: await memory(off.cluster.nodes[0]!.agent!.pid!) };
    const gbps: Record<'on' | 'off', number[]> = { on: [], off: [] };
    const us: Record<'on' | 'off', number[]> = { on: [], off: [] };
    for (let i = 0; i < reps; i++) {
      for (const [name, c] of [['on', on], ['off', off]] as const) {
        const [a, b] = c.pods as [NetPod, NetPod];
        gbps[name].push((await iperf({ ns: a.pod.ns }, { ns: b.pod.ns, ip: b.pod.ip })).gbps);
        us[name].push(await connectUs(a, b));
      }
    }
    say(`## NetworkPolicy on the data path and in the agent (${new Date().toISOString().slice(0, 10)}; ${podCount} Pods and ${policyCount + 2} NetworkPolicies in the API; two clusters side by side, alternating; medians of ${reps})`);
    say();
    say('| | enforcing | off | ratio |');
    say('|---|---|---|---|');
    say(`| pod-to-pod TCP across nodes (iperf3 -t 5) | ${median(gbps.on).toFixed(2)} Gbit/s | ${median(gbps.off).toFixed(2)} Gbit/s | ${(median(gbps.on) / median(gbps.off)).toFixed(3)} |`);
    say(`| a new TCP connection across nodes (median of 500 connects) | ${median(us.on).toFixed(0)} µs | ${median(us.off).toFixed(0)} µs | ${(median(us.on) / median(us.off)).toFixed(3)} |`);
    say(`| agent RssAnon / RssFile, 10 s after programming | ${mem.on.anon.toFixed(1)} / ${mem.on.file.toFixed(1)} MiB | ${mem.off.anon.toFixed(1)} / ${mem.off.file.toFixed(1)} MiB | +${(mem.on.anon - mem.off.anon).toFixed(1)} MiB anonymous |`);
    say(`| agent peak resident (VmHWM) | ${mem.on.peak.toFixed(1)} MiB | ${mem.off.peak.toFixed(1)} MiB | +${(mem.on.peak - mem.off.peak).toFixed(1)} MiB |`);
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  }
}

await main();
