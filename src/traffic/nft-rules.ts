/**
 * flannel 0.28's nftables tables (spec §8.5), text for text, from the one description of its rules
 * (traffic-rules.ts): per family a table (`ip flannel-ipv4`, `ip6 flannel-ipv6`; both always made,
 * as flannel does) holding `postrtg` and `forward`. Pure.
 */
import { formatCidr } from '../ip/cidr.js';
import type { Family } from '../ip/ip.js';
import type { OwnedTable } from './nft-table.js';
import { type Match, type Rule, flannelChains } from './traffic-rules.js';
import type { FamilyTraffic, TrafficOptions } from './traffic-manager.js';

export const flannelTableNames = [
  { family: 4, nftFamily: 'ip', name: 'flannel-ipv4' },
  { family: 6, nftFamily: 'ip6', name: 'flannel-ipv6' },
] as const satisfies ReadonlyArray<{ family: Family; nftFamily: OwnedTable['family']; name: string }>;

const addressField = { src: 'saddr', dst: 'daddr' } as const;

function matchText(m: Match, family: Family): string {
  if (m.on === 'mark') return `meta mark 0x${m.mark.toString(16)}`;
  return `${family === 4 ? 'ip' : 'ip6'} ${addressField[m.on]} ${m.not ? '!= ' : ''}${formatCidr(m.cidr)}`;
}

const verdictText = { return: 'return', accept: 'accept', masquerade: 'masquerade', 'masquerade-fully-random': 'masquerade fully-random' } as const;

export function nftRule(rule: Rule, family: Family): string {
  return [...(rule.nftMatch ?? rule.match).map((m) => matchText(m, family)), verdictText[rule.verdict]].join(' ');
}

/** Both of flannel's tables as `families` and `options` ask. */
export function flannelTables(families: readonly FamilyTraffic[], options: TrafficOptions): OwnedTable[] {
  return flannelTableNames.map((t) => {
    const f = families.find((x) => x.family === t.family);
    const chains = f
      ? flannelChains(f, options).map((chain) => ({
          name: chain.nft.chain,
          comment: chain.nft.comment,
          base: { type: chain.nft.type, hook: chain.hook, priority: chain.nft.priority, policy: 'accept' as const },
          rules: chain.rules.map((r) => nftRule(r, t.family)),
        }))
      : [];
    return { family: t.nftFamily, name: t.name, comment: `rules for ${t.name}`, chains };
  });
}

/** A dry run that only a kernel taking `masquerade fully-random` passes; without it, one any nat-capable kernel passes. */
export function nftMasqueradeProbe(fullyRandom: boolean): string {
  return `table ip weft-probe {\n  chain p {\n    type nat hook postrouting priority srcnat;\n    masquerade${fullyRandom ? ' fully-random' : ''}\n  }\n}\n`;
}
