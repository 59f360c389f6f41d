/**
 * flannel's chains (traffic-rules.ts) as iptables text, text for text flanneld 0.28's (spec §8.1,
 * §8.2), so that a flanneld started later on the node recognises them; and reading a chain back
 * from iptables-save. The family chooses iptables or ip6tables. Pure.
 */
import { formatCidr } from '../ip/cidr.js';
import type { IptablesVariant } from './iptables-variant.js';
import type { Family } from '../ip/ip.js';
import { type Chain, type Match, type Rule, flannelChains } from './traffic-rules.js';
import type { FamilyTraffic, TrafficOptions } from './traffic-manager.js';

export interface RuleSet {
  /** 4 for iptables, 6 for ip6tables. */
  readonly family: Family;
  readonly table: 'nat' | 'filter';
  readonly chain: string;
  /** The built-in chain that jumps to `chain`, and the jump rule's arguments. */
  readonly parent: string;
  readonly jump: string;
  /** Rule arguments, in order, without `-A <chain>`. */
  readonly rules: readonly string[];
  /**
   * The cluster network the rules are for, as text. Several agents on one host (one per network,
   * flannel's running.md) share the chain: a rule is this agent's when it names this network.
   */
  readonly network: string;
  /** flannel's comment on every rule of the chain ("flanneld masq", "flanneld forward"). */
  readonly comment: string;
}

const addressFlag = { src: '-s', dst: '-d' } as const;

function matchText(m: Match): string {
  if (m.on === 'mark') return `-m mark --mark 0x${m.mark.toString(16)}/0x${m.mark.toString(16)}`;
  return `${m.not ? '! ' : ''}${addressFlag[m.on]} ${formatCidr(m.cidr)}`;
}

const verdictText = { return: '-j RETURN', accept: '-j ACCEPT', masquerade: '-j MASQUERADE', 'masquerade-fully-random': '-j MASQUERADE --random-fully' } as const;

/** One rule's arguments: matches, flannel's comment, then the target. */
export function iptablesRule(rule: Rule, comment: string): string {
  return [...rule.match.map(matchText), `-m comment --comment "${comment}"`, verdictText[rule.verdict]].join(' ');
}

export function ruleSet(family: Family, chain: Chain, network: string): RuleSet {
  const { chain: name, table, parent, comment } = chain.iptables;
  return { family, table, chain: name, parent, jump: `-m comment --comment "${comment}" -j ${name}`, rules: chain.rules.map((r) => iptablesRule(r, comment)), network, comment };
}

/**
 * Whether a rule of the chain is this set's own: it names the set's network. flannel's rules all
 * do but the masquerade mark's RETURN, which every agent has in the same words: that one is shared,
 * kept once at the head of the chain, as flannel orders it.
 */
export function ownsRule(set: Pick<RuleSet, 'network'>, rule: string): boolean {
  return splitArgs(rule).includes(set.network);
}

/** The set's rules that name no network (shared by every agent's set), in order. */
export function sharedRules(set: RuleSet): string[] {
  return set.rules.filter((r) => !ownsRule(set, r));
}

/**
 * The rules of other agents in a chain's listing, in their order: flannel's rules (its comment)
 * for another network. Anything else in the chain is drift, and goes.
 */
export function othersRules(set: RuleSet, listed: readonly string[]): string[] {
  const shared = sharedRules(set);
  const flannels = `-m comment --comment "${set.comment}"`;
  return listed.filter((r) => r.includes(flannels) && !ownsRule(set, r) && !shared.includes(r) && splitArgs(r).some((a) => /^[0-9a-f:.]+\/\d+$/.test(a) && a !== set.network));
}

/** The iptables rule sets of these families: masquerade (when the subnet is known), then forward. */
export function iptablesRuleSets(families: readonly FamilyTraffic[], options: TrafficOptions): RuleSet[] {
  return families.flatMap((f) => flannelChains(f, options).map((chain) => ruleSet(f.family, chain, formatCidr(f.network))));
}

/**
 * An iptables-restore --noflush payload that (re)creates the chain with the shared rules, the
 * rules of other agents (`others`, other networks', kept in their order) and then exactly this
 * set's own, and appends the jump from the parent chain unless it is there already. With no other
 * agent that is flannel's order.
 */
export function restorePayload(set: RuleSet, options: { addJump: boolean; others?: readonly string[] }): string {
  const rules = [...sharedRules(set), ...(options.others ?? []), ...set.rules.filter((r) => ownsRule(set, r))];
  const lines = [`*${set.table}`, `:${set.chain} - [0:0]`, ...rules.map((r) => `-A ${set.chain} ${r}`)];
  if (options.addJump) lines.push(`-A ${set.parent} ${set.jump}`);
  lines.push('COMMIT', '');
  return lines.join('\n');
}

/** The lines of `chain` in iptables-save output, and how many times `parent` jumps to it. */
export function readChain(save: string, set: Pick<RuleSet, 'chain' | 'parent'>): { rules: string[]; chainExists: boolean; jumps: number } {
  const rules: string[] = [];
  let chainExists = false;
  let jumps = 0;
  for (const line of save.split('\n')) {
    if (line.startsWith(`:${set.chain} `)) chainExists = true;
    else if (line.startsWith(`-A ${set.chain} `)) rules.push(line.slice(`-A ${set.chain} `.length));
    else if (line.startsWith(`-A ${set.parent} `) && line.endsWith(`-j ${set.chain}`)) jumps++;
  }
  return { rules, chainExists, jumps };
}

/** The iptables command of a family: `iptables`, `ip6tables`, `iptables-save`, ... */
export function iptablesCommand(family: Family, suffix: '' | '-save' | '-restore', variant?: IptablesVariant): string {
  return `${family === 4 ? 'iptables' : 'ip6tables'}${variant ? `-${variant}` : ''}${suffix}`;
}

/** Splits rule text into arguments, keeping quoted comments whole. */
export function splitArgs(rule: string): string[] {
  return [...rule.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}
