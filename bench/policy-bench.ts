/**
 * `make bench`, NetworkPolicy part (needs root): a cluster of BENCH_POLICY_PODS pods (5000) in 50
 * namespaces, 110 of them on this node (Kubernetes' default pod limit per node), and 4 policies
 * per namespace (default deny, same-namespace and cross-namespace allows with named ports, an
 * ipBlock egress with an except):
 * - compiling and rendering the node's table (what every change costs before nft);
 * - the first install of the table in a throwaway namespace, by real nft;
 * - one local pod relabelled: the change written in place (NftOwner.update) against the table
 *   written whole (NftOwner.install), in the same run, with the size of each transaction;
 * - the resident memory the engine's world and programs hold (RssAnon of this process).
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

const podCount = Number(process.env['BENCH_POLICY_PODS'] ?? 5000);
const runs = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 5));
const namespaces = 50;
const localPods = 110;
const say = (line = ''): void => void process.stdout.write(line + '\n');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number): string => `${x.toFixed(1)} ms`;
const rss = (): { anon: number; file: number; heap: number } => {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { anon: kb('RssAnon') / 1024, file: kb('RssFile') / 1024, heap: process.memoryUsage().heapUsed / 2 ** 20 };
};
const log = createLogger({ level: 'error' });

function world(relabel?: string): World {
  const apps = ['frontend', 'backend', 'db', 'cache', 'worker'];
  const pods: PodRecord[] = [];
  for (let i = 0; i < podCount; i++) {
    const ns = `ns${i % namespaces}`;
    const name = `pod-${i}`;
    const app = relabel === name ? 'quarantine' : apps[i % apps.length]!;
    const ports = [{ name: 'http', containerPort: 8080 }, { name: 'metrics', containerPort: 9090 }];
    const ip = `198.18.${Math.floor(i / 250)}.${(i % 250) + 2}`;
    pods.push(decodePod({ metadata: { namespace: ns, name, labels: { app, tier: i % 2 ? 'a' : 'b' } }, spec: { nodeName: i % Math.ceil(podCount / localPods) === 0 ? 'node1' : 'other', containers: [{ ports }] }, status: { podIP: ip } })!);
  }
  const policies: PolicyRecord[] = [];
  for (let n = 0; n < namespaces; n++) {
    const ns = `ns${n}`;
    const raw = [
      { metadata: { namespace: ns, name: 'default-deny' }, spec: { podSelector: {}, policyTypes: ['Ingress'] } },
      { metadata: { namespace: ns, name: 'frontend-to-backend' }, spec: { podSelector: { matchLabels: { app: 'backend' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'frontend' } } }], ports: [{ port: 'http' }] }] } },
      { metadata: { namespace: ns, name: 'monitoring' }, spec: { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: `t${n % 5}` } } }], ports: [{ port: 'metrics' }] }] } },
      { metadata: { namespace: ns, name: 'egress' }, spec: { podSelector: { matchLabels: { app: 'worker' } }, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '198.18.0.0/15', except: [`198.18.${n}.0/24`] } }], ports: [{ port: 443 }, { port: 8000, endPort: 8100 }] }] } },
    ];
    for (const r of raw) {
      const p = decodePolicy(r)!;
      if (isRefused(p)) throw new Error(p.refused);
      policies.push(p);
    }
  }
  return { pods, namespaces: Array.from({ length: namespaces }, (_, n) => decodeNamespace({ metadata: { name: `ns${n}`, labels: { team: `t${n % 5}` } } })!), policies, nodes: new Map() };
}

async function main(): Promise<void> {
  const skip = netnsSkipReason();
  if (skip) {
    say(`policy bench skipped: ${skip}`);
    return;
  }
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
  gc();
  const before = rss();
  const w = world();
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
  const held = rss();
  const peakAnon = Number(/^VmHWM:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) / 1024;
  // A backend loses frontend-to-backend: its chain changes, and it leaves the peers of no set.
  const relabelled = programs.find((p) => p.pod.labels['app'] === 'backend')!.pod.name;
  const next = renderPolicyTable(compile(world(relabelled), 'node1'));
  const whole = replaceTables([table]);
  const change = updateTable(table, next)!;
  const install: number[] = [];
  const inPlace: number[] = [];
  const replaced: number[] = [];
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
      t0 = performance.now();
      await owner.install([table]);
      replaced.push(performance.now() - t0);
      if (await owner.check()) throw new Error('the table drifted in the bench');
    } finally {
      await deleteNetns(ns);
    }
  }
  say(`## NetworkPolicy (${new Date().toISOString().slice(0, 10)}, ${podCount} pods in ${namespaces} namespaces, ${programs.length} isolated on this node, ${w.policies.length} policies; medians of ${runs})`);
  say();
  say('| step | time | nft text |');
  say('|---|---|---|');
  say(`| compile and render the node's table | ${ms(median(compileMs))} | ${table.chains.length} chains, ${table.sets?.length ?? 0} sets |`);
  say(`| first install (nft -f, then the listing kept for drift checks) | ${ms(median(install))} | ${(whole.length / 1024).toFixed(0)} KiB |`);
  say(`| one local pod relabelled, written in place | ${ms(median(inPlace))} | ${change.length} bytes, ${change.split('\n').length - 1} lines |`);
  say(`| the same change, the table written whole | ${ms(median(replaced))} | ${(whole.length / 1024).toFixed(0)} KiB |`);
  say(`| ratio in place / whole | ${(median(inPlace) / median(replaced)).toFixed(2)} | |`);
  say();
  say(`Memory of the world, programs and table (after a collection): heap used ${before.heap.toFixed(1)} → ${held.heap.toFixed(1)} MiB; RssAnon ${before.anon.toFixed(1)} → ${held.anon.toFixed(1)} MiB; peak resident (VmHWM) ${peakAnon.toFixed(1)} MiB (RssFile ${before.file.toFixed(1)} → ${held.file.toFixed(1)} MiB).`);
}

await main();
