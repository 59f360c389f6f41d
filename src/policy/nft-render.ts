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
import { type Family, formatIp, ipv4 } from '../ip/ip.js';
import type { NftChain, NftSet, OwnedTable } from '../traffic/nft-table.js';
import type { CompiledRule, PodProgram, PortRange } from './compiler.js';
import type { Interval } from './intervals.js';

export const policyTable = { family: 'inet', name: 'weft-policy' } as const;

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
  const maps: Record<'in' | 'out', Record<Family, string[]>> = { in: { 4: [], 6: [] }, out: { 4: [], 6: [] } };
  let setNo = 0;
  const addressSet = (intervals: readonly Interval[], family: Family): string => {
    const name = `a${setNo++}`;
    sets.push({ name, type: addrType(family), flags: ['interval'], elements: intervals.filter((i) => i.family === family).map(element) });
    return name;
  };
  programs.forEach((program, i) => {
    const who = `${program.pod.namespace}/${program.pod.name}`;
    for (const [direction, rules, peerKey, tag] of [['ingress', program.ingress, 'saddr', 'in'], ['egress', program.egress, 'daddr', 'out']] as const) {
      if (!rules) continue;
      const chain = `p${i}-${tag}`;
      const body: string[] = [];
      for (const rule of rules) body.push(...ruleLines(rule, peerKey, addressSet, (pairs, family) => {
        const name = `t${setNo++}`;
        sets.push({ name, type: `${addrType(family)} . inet_proto . inet_service`, elements: pairs.filter((p) => p.address.family === family).map((p) => `${ipOfValue(family, p.address.first)} . ${proto(p.protocol)} . ${p.port}`) });
        return name;
      }));
      const verdict = options.dryRun
        ? ['counter', `limit rate 10/second log prefix ${JSON.stringify(`weft-policy dry run ${who} ${direction}: `.slice(0, 120))} level info`, 'return']
        : ['meta l4proto tcp counter reject with tcp reset', 'counter reject with icmpx port-unreachable'];
      chains.push({ name: chain, comment: `${who} ${direction}: ${program.policies.join(', ')}`, rules: [...body, ...verdict] });
      for (const ip of program.pod.ips) maps[tag][ip.family].push(`${formatIp(ip)} : jump ${chain}`);
    }
  });
  for (const tag of ['out', 'in'] as const) for (const f of [4, 6] as const) sets.push({ name: `${tag}${f}`, map: true, type: `${addrType(f)} : verdict`, elements: maps[tag][f] });
  const dispatch = (hook: 'forward' | 'input'): NftChain => ({
    name: hook,
    base: { type: 'filter', hook, priority: 'filter', policy: 'accept' },
    rules: [
      'ct state established,related accept',
      'ip saddr vmap @out4',
      'ip6 saddr vmap @out6',
      ...(hook === 'forward' ? ['ip daddr vmap @in4', 'ip6 daddr vmap @in6'] : []),
    ],
  });
  return { ...policyTable, comment: 'weft: NetworkPolicy for the pods of this node', sets, chains: [dispatch('forward'), dispatch('input'), ...chains] };
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
