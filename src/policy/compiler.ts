/**
 * NetworkPolicy compiled for the pods of this node: per pod and isolated direction, the rules that
 * let traffic through, each as the addresses and ports it matches, resolved against the pods and
 * namespaces there are now (selectors become address sets; named ports become numbers on the
 * destination pod). The nftables table is rendered from it (nft-render.ts); the model (model.ts)
 * is what it must agree with. Pure.
 */
import { type Interval, intervalOf, merge, subtract } from './intervals.js';
import { type Direction, type World, selecting } from './model.js';
import type { Peer, PodRecord, PolicyPort, PolicyRecord, PolicyRule, Protocol } from './records.js';
import { matches } from './selector.js';

/** A port match: one protocol, and a range of ports, or every port of it. */
export interface PortRange {
  readonly protocol: Protocol;
  readonly first?: number;
  readonly last?: number;
}

/**
 * What one rule lets through. `addresses` undefined: any peer. `ports` undefined: any port and
 * protocol. `pairs`: a named port that resolved to different numbers on different peers (egress),
 * as (address, protocol, port) triples; then `addresses` and `ports` are unused.
 */
export interface CompiledRule {
  readonly policy: string;
  readonly addresses?: readonly Interval[];
  readonly ports?: readonly PortRange[];
  readonly pairs?: ReadonlyArray<{ readonly address: Interval; readonly protocol: Protocol; readonly port: number }>;
}

export interface PodProgram {
  readonly pod: PodRecord;
  /** Present for an isolated direction: the rules that allow (none: it allows nothing). */
  readonly ingress?: readonly CompiledRule[];
  readonly egress?: readonly CompiledRule[];
  /** The policies selecting the pod, for `weft status`. */
  readonly policies: readonly string[];
}

const policyName = (p: PolicyRecord): string => `${p.namespace}/${p.name}`;
const hostInterval = (ip: PodRecord['ips'][number]): Interval => ({ family: ip.family, first: ip.value, last: ip.value });

/** The pods a peer selects (never hostNetwork ones), for a policy in `namespace`; `byNamespace` holds the world's pods that may be peers. */
function peerPods(world: World, peer: Extract<Peer, { kind: 'pods' }>, namespace: string, byNamespace: ReadonlyMap<string, readonly PodRecord[]>): PodRecord[] {
  const namespaces = peer.namespaceSelector ? world.namespaces.filter((n) => matches(peer.namespaceSelector!, n.labels)).map((n) => n.name) : [namespace];
  return namespaces.flatMap((ns) => (byNamespace.get(ns) ?? []).filter((p) => !peer.podSelector || matches(peer.podSelector, p.labels)));
}

function peerAddresses(world: World, peers: readonly Peer[], namespace: string, byNamespace: ReadonlyMap<string, readonly PodRecord[]>): { intervals: Interval[]; pods: PodRecord[] } {
  const intervals: Interval[] = [];
  const pods: PodRecord[] = [];
  for (const peer of peers) {
    if (peer.kind === 'ipBlock') {
      // An except takes its addresses out of its own block only: another peer may still have them.
      intervals.push(...subtract(intervalOf(peer.cidr), peer.except.map(intervalOf)));
    } else {
      for (const pod of peerPods(world, peer, namespace, byNamespace)) {
        pods.push(pod);
        intervals.push(...pod.ips.map(hostInterval));
      }
    }
  }
  return { intervals: merge(intervals), pods };
}

const numeric = (p: PolicyPort): PortRange => (p.port === undefined ? { protocol: p.protocol } : { protocol: p.protocol, first: p.port as number, last: p.endPort ?? (p.port as number) });

/**
 * What one compilation finds once per rule: its peers are the same for every pod its policy
 * selects, and so is an egress rule whole (its named ports resolve on the peers, not the pod).
 */
interface RuleCache {
  /** The pods that may be peers (not hostNetwork), by namespace. */
  readonly byNamespace: ReadonlyMap<string, readonly PodRecord[]>;
  /** By the peers' JSON (and the policy's namespace where they depend on it). */
  readonly peers: Map<string, ReturnType<typeof peerAddresses>>;
  readonly egress: Map<PolicyRule, CompiledRule[]>;
}

function compileRule(world: World, policy: PolicyRecord, rule: PolicyRule, direction: Direction, pod: PodRecord, cache: RuleCache): CompiledRule[] {
  if (direction === 'egress') {
    let whole = cache.egress.get(rule);
    if (!whole) cache.egress.set(rule, (whole = compileOnce(world, policy, rule, direction, pod, cache)));
    return whole;
  }
  return compileOnce(world, policy, rule, direction, pod, cache);
}

function compileOnce(world: World, policy: PolicyRecord, rule: PolicyRule, direction: Direction, pod: PodRecord, cache: RuleCache): CompiledRule[] {
  const name = policyName(policy);
  let peers: ReturnType<typeof peerAddresses> | undefined;
  if (rule.peers !== 'all') {
    // Rules of many policies name the same peers (every namespace's "from monitoring"): found
    // once. Only a podSelector without a namespaceSelector depends on the policy's namespace.
    const relative = rule.peers.some((p) => p.kind === 'pods' && !p.namespaceSelector);
    const key = `${relative ? policy.namespace : ''}|${JSON.stringify(rule.peers, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`;
    peers = cache.peers.get(key);
    if (!peers) cache.peers.set(key, (peers = peerAddresses(world, rule.peers, policy.namespace, cache.byNamespace)));
  }
  const addresses = peers?.intervals;
  if (rule.ports === 'all') return [{ policy: name, ...(addresses ? { addresses } : {}) }];
  const ports: PortRange[] = [];
  const pairs: Array<{ address: Interval; protocol: Protocol; port: number }> = [];
  for (const p of rule.ports) {
    if (typeof p.port !== 'string') {
      ports.push(numeric(p));
      continue;
    }
    if (direction === 'ingress') {
      // The destination is this pod: its own number for the name, if it has the name.
      for (const n of pod.ports) if (n.name === p.port && n.protocol === p.protocol) ports.push({ protocol: p.protocol, first: n.port, last: n.port });
      continue;
    }
    // Egress: the name is resolved on each peer pod; a peer that is no pod never matches it.
    const candidates = peers ? peers.pods : world.pods.filter((q) => !q.hostNetwork);
    for (const q of candidates) for (const n of q.ports) if (n.name === p.port && n.protocol === p.protocol) for (const ip of q.ips) pairs.push({ address: hostInterval(ip), protocol: p.protocol, port: n.port });
  }
  const out: CompiledRule[] = [];
  if (ports.length > 0) out.push({ policy: name, ...(addresses ? { addresses } : {}), ports });
  if (pairs.length > 0) out.push({ policy: name, pairs });
  return out;
}

/** The program of each pod on this node that a policy selects (hostNetwork pods never are). */
export function compile(world: World, node: string): PodProgram[] {
  const out: PodProgram[] = [];
  const byNamespace = new Map<string, PodRecord[]>();
  for (const p of world.pods) {
    if (p.hostNetwork) continue;
    const list = byNamespace.get(p.namespace);
    if (list) list.push(p);
    else byNamespace.set(p.namespace, [p]);
  }
  const cache: RuleCache = { byNamespace, peers: new Map(), egress: new Map() };
  for (const pod of world.pods) {
    if (pod.node !== node || pod.hostNetwork || pod.ips.length === 0) continue;
    const program: { pod: PodRecord; ingress?: CompiledRule[]; egress?: CompiledRule[]; policies: string[] } = { pod, policies: [] };
    for (const direction of ['ingress', 'egress'] as const) {
      const policies = selecting(world, pod, direction);
      if (policies.length === 0) continue;
      program[direction] = policies.flatMap((p) => p[direction]!.flatMap((rule) => compileRule(world, p, rule, direction, pod, cache)));
      for (const p of policies) if (!program.policies.includes(policyName(p))) program.policies.push(policyName(p));
    }
    if (program.ingress || program.egress) out.push(program);
  }
  return out;
}

/** What a compiled program says of one connection: the check the tests hold it to against the model. */
export function programAllows(rules: readonly CompiledRule[] | undefined, peer: { family: 4 | 6; value: bigint }, port: number, protocol: Protocol): boolean {
  if (!rules) return true;
  const inSet = (set: readonly Interval[]): boolean => set.some((i) => i.family === peer.family && peer.value >= i.first && peer.value <= i.last);
  return rules.some((r) => {
    if (r.pairs) return r.pairs.some((x) => x.protocol === protocol && x.port === port && inSet([x.address]));
    const portOk = !r.ports || r.ports.some((p) => p.protocol === protocol && (p.first === undefined || (port >= p.first && port <= p.last!)));
    return portOk && (!r.addresses || inSet(r.addresses));
  });
}
