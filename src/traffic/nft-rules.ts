/**
 * flannel 0.28's nftables rules (spec §8.5), text for text, as one `nft -f` transaction: per
 * family a table (`ip flannel-ipv4`, `ip6 flannel-ipv6`; both always made, as flannel does) that is
 * replaced whole, so that readers see the old rules or the new ones and never a half-written set.
 * The "not from this node's subnet" rule is flannel's own (`saddr != <P> daddr <C>`), which differs
 * from its iptables rule (`! -s <C> -d <P>`): weft writes what a flannel node shows. Pure.
 */
import { formatCidr } from '../ip/cidr.js';
import type { Family } from '../ip/ip.js';
import type { FamilyTraffic, TrafficOptions } from './traffic-manager.js';

export const nftTables = [
  { family: 4, nftFamily: 'ip', name: 'flannel-ipv4' },
  { family: 6, nftFamily: 'ip6', name: 'flannel-ipv6' },
] as const satisfies ReadonlyArray<{ family: Family; nftFamily: string; name: string }>;

export const masqChainComment = 'chain to manage traffic masquerading by flannel';
export const forwardChainComment = 'chain to accept flannel traffic';

/** The transaction that makes both tables exactly as `families` and `options` ask. */
export function nftRuleset(families: readonly FamilyTraffic[], options: TrafficOptions): string {
  const lines: string[] = [];
  for (const t of nftTables) {
    const head = `table ${t.nftFamily} ${t.name}`;
    // Adding first makes the delete valid when the table does not exist yet.
    lines.push(`add ${head}`, `delete ${head}`, `${head} {`, `  comment "rules for ${t.name}"`);
    const f = families.find((x) => x.family === t.family);
    if (f) lines.push(...familyChains(f, options));
    lines.push('}');
  }
  return lines.join('\n') + '\n';
}

function familyChains(f: FamilyTraffic, options: TrafficOptions): string[] {
  const ip = f.family === 4 ? 'ip' : 'ip6';
  const c = formatCidr(f.network);
  const out: string[] = [];
  if (options.masquerade && f.subnet) {
    const p = formatCidr(f.subnet);
    const multicast = f.family === 4 ? '224.0.0.0/4' : 'ff00::/8';
    const masq = options.randomFully ? 'masquerade fully-random' : 'masquerade';
    out.push(
      '  chain postrtg {',
      `    comment "${masqChainComment}"`,
      '    type nat hook postrouting priority srcnat; policy accept;',
      '    meta mark 0x4000 return',
      `    ${ip} saddr ${p} ${ip} daddr ${c} return`,
      `    ${ip} saddr ${c} ${ip} daddr ${p} return`,
      `    ${ip} saddr != ${p} ${ip} daddr ${c} return`,
      `    ${ip} saddr ${c} ${ip} daddr != ${multicast} ${masq}`,
      `    ${ip} saddr != ${c} ${ip} daddr ${c} ${masq}`,
      '  }',
    );
  }
  if (options.forward) {
    out.push(
      '  chain forward {',
      `    comment "${forwardChainComment}"`,
      '    type filter hook forward priority filter; policy accept;',
      `    ${ip} saddr ${c} accept`,
      `    ${ip} daddr ${c} accept`,
      '  }',
    );
  }
  return out;
}

/** What `nftRuleset` makes, as chains and their rule counts per table, to compare with a listing. */
export function nftShape(families: readonly FamilyTraffic[], options: TrafficOptions): string {
  return nftTables
    .map((t) => {
      const f = families.find((x) => x.family === t.family);
      const chains = [...(f && options.masquerade && f.subnet ? ['postrtg=6'] : []), ...(f && options.forward ? ['forward=2'] : [])];
      return `${t.name}:${chains.join(',')}`;
    })
    .join(' ');
}

/** Deletes both tables, if they exist (the iptables mode's clean-up of this one). */
export function nftDeleteTables(): string {
  return nftTables.flatMap((t) => [`add table ${t.nftFamily} ${t.name}`, `delete table ${t.nftFamily} ${t.name}`]).join('\n') + '\n';
}

/** A dry-run probe: does this kernel accept `masquerade fully-random`? */
export const nftFullyRandomProbe = 'table ip weft-probe {\n  chain p {\n    type nat hook postrouting priority srcnat;\n    masquerade fully-random\n  }\n}\n';
