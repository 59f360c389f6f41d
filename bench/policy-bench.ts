/**
 * `make bench`, NetworkPolicy part (needs root): clusters of 1000 and 5000 pods in 50 namespaces,
 * about 110 of them on this node (Kubernetes' default pod limit per node), with 100 and 1000
 * policies (default deny, same-namespace and cross-namespace allows with named ports, ipBlock
 * egress with an except and port ranges, in turn; BENCH_POLICY_GRID=pods x policies,...):
 * - compiling and rendering the node's table (what every change costs before nft);
 * - the first install of the table in a throwaway namespace, by real nft;
 * - one local pod relabelled: the change written in place (NftOwner.update, which resolves once
 *   the change is in the kernel) against the table written whole (NftOwner.install), in the same
 *   run, with the size of each transaction; and the drift check after it (the listing of what
 *   changed, then of the whole table);
 * - the heap the world, programs and table hold after a collection.
 * flanneld has no NetworkPolicy to compare with.
 */
import { readFileSync } from 'node:fs';
import { createLogger } from '../src/core/log.js';
import { compile } from '../src/policy/compiler.js';
import type { World } from '../src/policy/model.js';
import { renderPolicyTable } from '../src/policy/nft-render.js';
import { type PodRecord, type PolicyRecord, decodeNamespace, decodePod, decodePolicy, isRefused } from '../src/policy/records.js';
import { createNetns, deleteNetns, netnsSkipReason, nsName } from '../src/testing/netns.js';
import { type Exec, execCommand } from '../src/traffic/exec.js';
import { NftOwner } from '../src/traffic/nft-owner.js';
import { replaceTables, updateTable } from '../src/traffic/nft-table.js';

const runs = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 5));
const namespaces = 50;
const localPods = 110;
/** pods x policies, as the issue asks: 1000 and 5000 pods, 100 and 1000 policies. */
const grid = (process.env['BENCH_POLICY_GRID'] ?? '1000x100,1000x1000,5000x100,5000x1000').split(',').map((g) => g.split('x').map(Number) as [number, number]);
const say = (line = ''): void => void process.stdout.write(line + '\n');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number): string => `${x.toFixed(1)} ms`;
const rss = (): { anon: number; file: number; heap: number } => {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { anon: kb('RssAnon') / 1024, file: kb('RssFile') / 1024, heap: process.memoryUsage().heapUsed / 2 ** 20 };
};
const log = createLogger({ level: 'error' });

function world(podCount: number, policyCount: number, relabel?: string): World {
  const apps = ['frontend', 'backend', 'db', 'cache', 'worker'];
  const pods: PodRecord[] = [];
  for (let i = 0; i < podCount; i++) {
    const ns = `ns${i % namespaces}`;
    const name = `pod-${i}`;
    // Not i % 5 alone: the pods of the measured node (every step-th) would all be alike.
    const app = relabel === name ? 'quarantine' : apps[(i + Math.floor(i / 10)) % apps.length]!;
    const ports = [{ name: 'http', containerPort: 8080 }, { name: 'metrics', containerPort: 9090 }];
    const ip = `198.18.${Math.floor(i / 250)}.${(i % 250) + 2}`;
    pods.push(decodePod({ metadata: { namespace: ns, name, labels: { app, tier: i % 2 ? 'a' : 'b', shard: `s${i % 7}` } }, spec: { nodeName: i % Math.ceil(podCount / localPods) === 0 ? 'node1' : 'other', containers: [{ ports }] }, status: { podIP: ip } })!);
  }
  // Four kinds of policy, in turn, each copy selecting by its own shard or port so that no two are alike.
  const kinds = [
    (ns: string, _n: number, k: number) => ({ metadata: { namespace: ns, name: `default-deny-${k}` }, spec: { podSelector: { matchLabels: { shard: `s${k % 7}` } }, policyTypes: ['Ingress'] } }),
    (ns: string, _n: number, k: number) => ({ metadata: { namespace: ns, name: `frontend-to-backend-${k}` }, spec: { podSelector: { matchLabels: { app: 'backend' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'frontend', shard: `s${k % 7}` } } }], ports: [{ port: 'http' }] }] } }),
    (ns: string, n: number, k: number) => ({ metadata: { namespace: ns, name: `monitoring-${k}` }, spec: { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: `t${(n + k) % 5}` } } }], ports: [{ port: 'metrics' }] }] } }),
    (ns: string, n: number, k: number) => ({ metadata: { namespace: ns, name: `egress-${k}` }, spec: { podSelector: { matchLabels: { app: 'worker' } }, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '198.18.0.0/15', except: [`198.18.${(n + k) % 20}.0/24`] } }], ports: [{ port: 443 + k }, { port: 8000, endPort: 8100 }] }] } }),
  ];
  const policies: PolicyRecord[] = [];
  for (let i = 0; i < policyCount; i++) {
    const n = i % namespaces;
    const k = Math.floor(i / namespaces);
    const p = decodePolicy(kinds[k % kinds.length]!(`ns${n}`, n, k))!;
    if (isRefused(p)) throw new Error(p.refused);
    policies.push(p);
  }
  return { pods, namespaces: Array.from({ length: namespaces }, (_, n) => decodeNamespace({ metadata: { name: `ns${n}`, labels: { team: `t${n % 5}` } } })!), policies, nodes: new Map() };
}

interface Row {
  readonly pods: number;
  readonly policies: number;
  readonly isolated: number;
  readonly chains: number;
  readonly sets: number;
  readonly compileMs: number;
  readonly installMs: number;
  readonly inPlaceMs: number;
  readonly wholeMs: number;
  readonly checkMs: number;
  readonly kib: number;
  readonly changeBytes: number;
  readonly heapMiB: number;
}

async function measure(podCount: number, policyCount: number): Promise<Row> {
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const w = world(podCount, policyCount);
  const compileMs: number[] = [];
  let programs = compile(w, 'node1');
  let table = renderPolicyTable(programs);
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    programs = compile(w, 'node1');
    table = renderPolicyTable(programs);
    compileMs.push(performance.now() - t0);
  }
  gc();
  const heapMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
  // A backend loses frontend-to-backend: its chain changes, and it leaves no set's peers.
  const relabelled = programs.find((p) => p.pod.labels['app'] === 'backend')!.pod.name;
  const next = renderPolicyTable(compile(world(podCount, policyCount, relabelled), 'node1'));
  const whole = replaceTables([table]);
  const change = updateTable(table, next)!.text;
  const install: number[] = [];
  const inPlace: number[] = [];
  const replaced: number[] = [];
  const checks: number[] = [];
  for (let i = 0; i < runs; i++) {
    const ns = nsName('pb');
    await createNetns(ns);
    try {
      const exec: Exec = (cmd, args, input) => execCommand('ip', ['netns', 'exec', ns, cmd, ...args], input);
      const owner = new NftOwner({ exec, log });
      let t0 = performance.now();
      await owner.install([table]);
      install.push(performance.now() - t0);
      t0 = performance.now();
      if ((await owner.update([next])) !== 'updated') throw new Error('the change was not written in place');
      inPlace.push(performance.now() - t0);
      // The listing of what changed, then the whole table compared: what a drift check costs.
      t0 = performance.now();
      if (await owner.check()) throw new Error('the table drifted in the bench');
      checks.push(performance.now() - t0);
      t0 = performance.now();
      await owner.install([table]);
      replaced.push(performance.now() - t0);
    } finally {
      await deleteNetns(ns);
    }
  }
  return {
    pods: podCount,
    policies: policyCount,
    isolated: programs.length,
    chains: table.chains.length,
    sets: table.sets?.length ?? 0,
    compileMs: median(compileMs),
    installMs: median(install),
    inPlaceMs: median(inPlace),
    wholeMs: median(replaced),
    checkMs: median(checks),
    kib: whole.length / 1024,
    changeBytes: change.length,
    heapMiB,
  };
}

async function main(): Promise<void> {
  const skip = netnsSkipReason();
  if (skip) {
    say(`policy bench skipped: ${skip}`);
    return;
  }
  const before = rss();
  const rows: Row[] = [];
  for (const [pods, policies] of grid) rows.push(await measure(pods, policies));
  const after = rss();
  const peak = Number(/^VmHWM:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) / 1024;
  say(`## NetworkPolicy (${new Date().toISOString().slice(0, 10)}; ${namespaces} namespaces, about ${localPods} pods on the measured node; medians of ${runs})`);
  say();
  say('| pods | policies | isolated here | chains, sets | compile + render | first install | one pod changed: in the kernel, in place | the same, written whole | in place / whole | a label change to the kernel (compile, render, write) | drift check after it | table | change | heap held |');
  say('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    say(`| ${r.pods} | ${r.policies} | ${r.isolated} | ${r.chains}, ${r.sets} | ${ms(r.compileMs)} | ${ms(r.installMs)} | ${ms(r.inPlaceMs)} | ${ms(r.wholeMs)} | ${(r.inPlaceMs / r.wholeMs).toFixed(2)} | ${ms(r.compileMs + r.inPlaceMs)} | ${ms(r.checkMs)} | ${r.kib.toFixed(0)} KiB | ${r.changeBytes} B | ${r.heapMiB.toFixed(1)} MiB |`);
  }
  say();
  say(`The bench process: RssAnon ${before.anon.toFixed(1)} → ${after.anon.toFixed(1)} MiB, RssFile ${before.file.toFixed(1)} → ${after.file.toFixed(1)} MiB, peak resident (VmHWM) ${peak.toFixed(1)} MiB.`);
}

await main();
