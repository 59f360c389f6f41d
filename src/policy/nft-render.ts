/**
 * The compiled programs (compiler.ts) as one nftables table of weft's own, `inet weft-policy`,
 * beside flannel's tables and never touching them (an NftOwner of its own keeps it). Pure.
 *
 * - Base chains on forward (pod to pod, this node's pods and others', bridged ones too where
 *   br_netfilter hands them to the IP hooks, as kube-proxy needs anyway) and input (a pod's
 *   traffic to its own node is egress like any other). Replies are accepted first (conntrack).
 * - Verdict maps from a local pod's address to its chains: its egress chain for what it sends, then
 *   its ingress chain for what it receives. Each chain returns when a rule allows, so the
 *   destination's ingress is still checked after the source's egress allowed (same-node pairs
 *   pass both: the pitfall where an early accept skipped ingress), and rejects otherwise: a TCP
 *   reset, an ICMP port unreachable for the rest, so applications fail fast instead of timing out.
 * - Traffic from the node itself to its pods goes through output, not forward: never blocked.
 * - In a dry run, the chains count and log (rate-limited) what they would reject, and return.
 */
import { createHash } from 'node:crypto';
import { type Family, formatIp, ipv4 } from '../ip/ip.js';
import type { NftChain, NftSet, OwnedTable } from '../traffic/nft-table.js';
import type { CompiledRule, PodProgram, PortRange } from './compiler.js';
import type { Interval } from './intervals.js';

export const policyTable = { family: 'inet', name: 'weft-policy' } as const;

/**
 * A dry run's pairs (source . destination) that it would have rejected, with a counter each, per
 * direction (`out`: the source's egress, `in`: the destination's ingress) and family. A pair
 * silent for an hour goes; the set holds the busiest 65536 (a full set adds no new pair, and the
 * chain's own counter still counts it).
 */
export const dryRunSet = (tag: 'in' | 'out', family: Family): string => `dry-${tag}${family}`;
const dryRunPairs = { timeoutS: 3600, size: 65536 } as const;

/** The chain of the `i`th program for one direction (`in`: ingress, `out`: egress). */
/**
 * A pod's chain for one direction (`in`: ingress, `out`: egress), named by a hash of the pod's
 * namespace and name: the same pod keeps its chain's name whatever else changes, so that a change
 * to one pod rewrites only its chain and sets (nft-table.ts updateTable), and names stay within
 * nft's length limit whatever the pod is called.
 */
export const podChain = (pod: { readonly namespace: string; readonly name: string }, tag: 'in' | 'out'): string => `${tag}-${digest(`${pod.namespace}/${pod.name}`)}`;

/** The named counter of a pod's chain: what it rejected (or would have), across rewrites of the chain. */
export const counterOf = (chain: string): string => `c-${chain}`;

const digest = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 16);

const ipOfValue = (family: Family, value: bigint): string => formatIp(family === 4 ? ipv4(value) : { family: 6, value });
const element = (i: Interval): string => (i.first === i.last ? ipOfValue(i.family, i.first) : `${ipOfValue(i.family, i.first)}-${ipOfValue(i.family, i.last)}`);
const addrType = (f: Family): string => (f === 4 ? 'ipv4_addr' : 'ipv6_addr');
const addrKey = (f: Family): string => (f === 4 ? 'ip' : 'ip6');
const proto = (p: string): string => p.toLowerCase();

function portClauses(ports: readonly PortRange[] | undefined): string[] {
  if (!ports) return [''];
  const byProto = new Map<string, string[] | 'all'>();
  for (const p of ports) {
    const have = byProto.get(p.protocol);
    if (p.first === undefined || have === 'all') byProto.set(p.protocol, 'all');
    else byProto.set(p.protocol, [...(have ?? []), p.first === p.last ? String(p.first) : `${p.first}-${p.last}`]);
  }
  return [...byProto].map(([p, list]) => (list === 'all' ? `meta l4proto ${proto(p)} ` : `meta l4proto ${proto(p)} th dport { ${[...new Set(list)].join(', ')} } `));
}

export interface RenderOptions {
  /** Count and log what would be rejected, and let it through. */
  readonly dryRun?: boolean;
}

/** The whole table for these programs. */
export function renderPolicyTable(programs: readonly PodProgram[], options: RenderOptions = {}): OwnedTable {
  const sets: NftSet[] = [];
  const chains: NftChain[] = [];
  const counters: string[] = [];
  const maps: Record<'in' | 'out', Record<Family, string[]>> = { in: { 4: [], 6: [] }, out: { 4: [], 6: [] } };
  // A rule's peers are the same for every pod its policy selects: one set serves all their chains,
  // named after the policy's rule rather than its contents, so that a peer coming or going
  // changes the set's elements in place and no chain (nor its counters) is written over.
  let chain = '';
  let ordinal = new Map<string, number>();
  const shared = new Map<string, { name: string; content: string; source: unknown }>();
  const names = new Set<string>();
  /** `source`: what the elements were made from; the compiler hands every chain of a rule the same one, so it is formatted once. */
  const sharedSet = (policy: string, family: Family, source: unknown, make: () => Omit<NftSet, 'name'>): string => {
    const n = ordinal.get(policy) ?? 0;
    ordinal.set(policy, n + 1);
    const semantic = `${policy}|${chain.slice(0, chain.indexOf('-'))}|${n}|${family}`;
    const have = shared.get(semantic);
    if (have && have.source === source) return have.name;
    const set = make();
    const content = `${set.type}|${set.elements.join(',')}`;
    if (have?.content === content) return have.name;
    // Another target resolved the rule otherwise (a named port it lacks): a set of its own.
    const name = have ? `s-${digest(semantic)}-${digest(content).slice(0, 8)}` : `s-${digest(semantic)}`;
    if (!have) shared.set(semantic, { name, content, source });
    if (!names.has(name)) {
      names.add(name);
      sets.push({ name, ...set });
    }
    return name;
  };
  // Policies that name the same peers share their intervals (the compiler finds them once): their
  // elements are formatted once too.
  const formatted = new Map<readonly Interval[], Map<Family, string[]>>();
  const elementsOf = (intervals: readonly Interval[], family: Family): string[] => {
    let byFamily = formatted.get(intervals);
    if (!byFamily) formatted.set(intervals, (byFamily = new Map()));
    let out = byFamily.get(family);
    if (!out) byFamily.set(family, (out = intervals.filter((i) => i.family === family).map(element)));
    return out;
  };
  const addressSet = (policy: string, intervals: readonly Interval[], family: Family): string =>
    sharedSet(policy, family, intervals, () => ({ type: addrType(family), flags: ['interval'], elements: elementsOf(intervals, family) }));
  for (const program of programs) {
    const who = `${program.pod.namespace}/${program.pod.name}`;
    for (const [direction, rules, peerKey, tag] of [['ingress', program.ingress, 'saddr', 'in'], ['egress', program.egress, 'daddr', 'out']] as const) {
      if (!rules) continue;
      chain = podChain(program.pod, tag);
      ordinal = new Map();
      const body: string[] = [];
      for (const rule of rules) {
        body.push(
          ...ruleLines(rule, peerKey, (intervals, family) => addressSet(rule.policy, intervals, family), (pairs, family) =>
            sharedSet(rule.policy, family, pairs, () => ({ type: `${addrType(family)} . inet_proto . inet_service`, elements: pairs.filter((p) => p.address.family === family).map((p) => `${ipOfValue(family, p.address.first)} . ${proto(p.protocol)} . ${p.port}`) })),
          ),
        );
      }
      const counted = `counter name ${JSON.stringify(counterOf(chain))}`;
      counters.push(counterOf(chain));
      const verdict = options.dryRun
        ? [
            counted,
            `update @${dryRunSet(tag, 4)} { ip saddr . ip daddr counter }`,
            `update @${dryRunSet(tag, 6)} { ip6 saddr . ip6 daddr counter }`,
            `limit rate 10/second log prefix ${JSON.stringify(`weft-policy dry run ${who} ${direction}: `.slice(0, 120))} level info`,
            'return',
          ]
        : [`meta l4proto tcp ${counted} reject with tcp reset`, `${counted} reject with icmpx port-unreachable`];
      // The policies on a rule, not on the chain: nft cannot change a chain's comment in place.
      verdict[0] = `${verdict[0]} comment ${JSON.stringify(program.policies.join(', ').slice(0, 120))}`;
      chains.push({ name: chain, comment: `${who} ${direction}`, rules: [...body, ...verdict] });
      for (const ip of program.pod.ips) maps[tag][ip.family].push(`${formatIp(ip)} : jump ${chain}`);
    }
  }
  for (const tag of ['out', 'in'] as const) for (const f of [4, 6] as const) sets.push({ name: `${tag}${f}`, map: true, type: `${addrType(f)} : verdict`, elements: maps[tag][f] });
  if (options.dryRun) {
    for (const tag of ['out', 'in'] as const) for (const f of [4, 6] as const) sets.push({ name: dryRunSet(tag, f), type: `${addrType(f)} . ${addrType(f)}`, elements: [], dynamic: dryRunPairs });
  }
  const dispatch = (hook: 'forward' | 'input'): NftChain => ({
    name: hook,
    base: { type: 'filter', hook, priority: 'filter', policy: 'accept' },
    rules: [
      'ct state established,related accept',
      // IPv6's ARP: a pod that cannot resolve its gateway or a neighbour on the bridge reaches
      // nothing, whatever its policies allow (IPv4's ARP never meets these hooks).
      'icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept',
      'ip saddr vmap @out4',
      'ip6 saddr vmap @out6',
      ...(hook === 'forward' ? ['ip daddr vmap @in4', 'ip6 daddr vmap @in6'] : []),
    ],
  });
  return { ...policyTable, comment: 'weft: NetworkPolicy for the pods of this node', counters, sets, chains: [dispatch('forward'), dispatch('input'), ...chains] };
}

function ruleLines(
  rule: CompiledRule,
  peerKey: 'saddr' | 'daddr',
  addressSet: (intervals: readonly Interval[], family: Family) => string,
  pairSet: (pairs: NonNullable<CompiledRule['pairs']>, family: Family) => string,
): string[] {
  const lines: string[] = [];
  if (rule.pairs) {
    for (const f of [4, 6] as const) {
      if (!rule.pairs.some((p) => p.address.family === f)) continue;
      lines.push(`${addrKey(f)} ${peerKey} . meta l4proto . th dport @${pairSet(rule.pairs, f)} return`);
    }
    return lines;
  }
  const ports = portClauses(rule.ports);
  if (!rule.addresses) {
    for (const p of ports) lines.push(`${p}return`);
    return lines;
  }
  for (const f of [4, 6] as const) {
    if (!rule.addresses.some((i) => i.family === f)) continue;
    const set = addressSet(rule.addresses, f);
    for (const p of ports) lines.push(`${addrKey(f)} ${peerKey} @${set} ${p}return`);
  }
  return lines;
}
