/**
 * flanneld's iptables rules, text for text (spec §8.1-8.2, v0.28 form), so that a flanneld
 * started later on the node recognises them. One description per family: the family of the
 * network chooses iptables or ip6tables and the multicast range. Pure.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import { type Cidr, formatCidr } from '../ip/cidr.js';
import type { Family } from '../ip/ip.js';
import type { FamilyTraffic, TrafficOptions } from './traffic-manager.js';

export const masqComment = 'flanneld masq';
export const forwardComment = 'flanneld forward';
export const masqChain = 'FLANNEL-POSTRTG';
export const forwardChain = 'FLANNEL-FWD';

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

export function masqRuleSet(network: Cidr, own: Cidr, options: { randomFully: boolean }): RuleSet {
  if (own.ip.family !== network.ip.family) throw new WeftError(ErrorCodes.INTERNAL, 'the node subnet and the network must be of one family');
  const c = formatCidr(network);
  const p = formatCidr(own);
  const multicast = network.ip.family === 4 ? '224.0.0.0/4' : 'ff00::/8';
  const m = `-m comment --comment "${masqComment}"`;
  const masq = `-j MASQUERADE${options.randomFully ? ' --random-fully' : ''}`;
  return {
    family: network.ip.family,
    table: 'nat',
    chain: masqChain,
    parent: 'POSTROUTING',
    jump: `${m} -j ${masqChain}`,
    rules: [
      `-m mark --mark 0x4000/0x4000 ${m} -j RETURN`,
      `-s ${p} -d ${c} ${m} -j RETURN`,
      `-s ${c} -d ${p} ${m} -j RETURN`,
      `! -s ${c} -d ${p} ${m} -j RETURN`,
      `-s ${c} ! -d ${multicast} ${m} ${masq}`,
      `! -s ${c} -d ${c} ${m} ${masq}`,
    ],
  };
}

export function forwardRuleSet(network: Cidr): RuleSet {
  const c = formatCidr(network);
  const m = `-m comment --comment "${forwardComment}"`;
  return {
    family: network.ip.family,
    table: 'filter',
    chain: forwardChain,
    parent: 'FORWARD',
    jump: `${m} -j ${forwardChain}`,
    rules: [`-s ${c} ${m} -j ACCEPT`, `-d ${c} ${m} -j ACCEPT`],
  };
}

/** The iptables rule sets of these families: masquerade (when the subnet is known), then forward. */
export function iptablesRuleSets(families: readonly FamilyTraffic[], options: TrafficOptions): RuleSet[] {
  const sets: RuleSet[] = [];
  for (const f of families) {
    if (options.masquerade && f.subnet) sets.push(masqRuleSet(f.network, f.subnet, { randomFully: options.randomFully }));
    if (options.forward) sets.push(forwardRuleSet(f.network));
  }
  return sets;
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

/** The lines of `chain` in iptables-save output, and whether `parent` jumps to it. */
export function readChain(save: string, set: RuleSet): { rules: string[]; chainExists: boolean; jumps: number } {
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

/** The iptables command of the set's family: `iptables`, `ip6tables`, `iptables-save`, ... */
export function iptablesCommand(family: Family, suffix: '' | '-save' | '-restore'): string {
  return `${family === 4 ? 'iptables' : 'ip6tables'}${suffix}`;
}
