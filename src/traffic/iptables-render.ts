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

export function ruleSet(family: Family, chain: Chain): RuleSet {
  const { chain: name, table, parent, comment } = chain.iptables;
  return { family, table, chain: name, parent, jump: `-m comment --comment "${comment}" -j ${name}`, rules: chain.rules.map((r) => iptablesRule(r, comment)) };
}

/** The iptables rule sets of these families: masquerade (when the subnet is known), then forward. */
export function iptablesRuleSets(families: readonly FamilyTraffic[], options: TrafficOptions): RuleSet[] {
  return families.flatMap((f) => flannelChains(f, options).map((chain) => ruleSet(f.family, chain)));
}

/**
 * An iptables-restore --noflush payload that (re)creates the chain with exactly these rules,
 * and appends the jump from the parent chain unless it is there already.
 */
export function restorePayload(set: RuleSet, options: { addJump: boolean }): string {
  const lines = [`*${set.table}`, `:${set.chain} - [0:0]`, ...set.rules.map((r) => `-A ${set.chain} ${r}`)];
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
