/**
 * An nftables table that one owner keeps whole: its sets and chains as data, rendered into one
 * `nft -f` transaction that replaces the table (a reader sees the old table or the new one, never
 * half of either), and its shape (chains with their rule counts, sets with their element counts)
 * to recognise in a listing. flannel's two tables are one owner's (nftables.ts); a policy engine's
 * tables are another's, each with its own drift check (nft-owner.ts). Pure.
 */

export interface NftChain {
  readonly name: string;
  readonly comment?: string;
  /** A base chain's hook, e.g. `type nat hook postrouting priority srcnat; policy accept;`. */
  readonly base?: { readonly type: 'filter' | 'nat' | 'route'; readonly hook: string; readonly priority: string; readonly policy: 'accept' | 'drop' };
  /** Rules as nft writes them, in order. */
  readonly rules: readonly string[];
}

export interface NftSet {
  readonly name: string;
  /** A map (`type ipv4_addr : verdict`, elements `key : value`) rather than a set. */
  readonly map?: boolean;
  /** `ipv4_addr`, `ipv6_addr`, `inet_service`, ... */
  readonly type: string;
  /** `interval` for prefixes and ranges. */
  readonly flags?: readonly string[];
  readonly elements: readonly string[];
}

export interface OwnedTable {
  readonly family: 'ip' | 'ip6' | 'inet';
  readonly name: string;
  readonly comment?: string;
  readonly sets?: readonly NftSet[];
  readonly chains: readonly NftChain[];
}

/** The transaction that makes each table exactly as described, whatever was there before. */
export function replaceTables(tables: readonly OwnedTable[]): string {
  const lines: string[] = [];
  for (const t of tables) {
    const head = `table ${t.family} ${t.name}`;
    // Adding first makes the delete valid when the table does not exist yet.
    lines.push(`add ${head}`, `delete ${head}`, `${head} {`);
    if (t.comment) lines.push(`  comment ${quote(t.comment)}`);
    for (const s of t.sets ?? []) {
      lines.push(`  ${s.map ? 'map' : 'set'} ${s.name} {`, `    type ${s.type}`);
      if (s.flags?.length) lines.push(`    flags ${s.flags.join(', ')}`);
      if (s.elements.length > 0) lines.push(`    elements = { ${s.elements.join(', ')} }`);
      lines.push('  }');
    }
    for (const c of t.chains) {
      lines.push(`  chain ${c.name} {`);
      if (c.comment) lines.push(`    comment ${quote(c.comment)}`);
      if (c.base) lines.push(`    type ${c.base.type} hook ${c.base.hook} priority ${c.base.priority}; policy ${c.base.policy};`);
      for (const r of c.rules) lines.push(`    ${r}`);
      lines.push('  }');
    }
    lines.push('}');
  }
  return lines.join('\n') + '\n';
}

/** Deletes the tables where they exist, and nothing else. */
export function deleteTables(tables: ReadonlyArray<Pick<OwnedTable, 'family' | 'name'>>): string {
  return tables.flatMap((t) => [`add table ${t.family} ${t.name}`, `delete table ${t.family} ${t.name}`]).join('\n') + '\n';
}

/** What a listing of the table must show: its chains with their rule counts, its sets with their element counts. */
export function tableShape(t: OwnedTable): string {
  return shapeText(t.name, t.chains.map((c) => [c.name, c.rules.length]), (t.sets ?? []).map((s) => [s.name, s.elements.length]));
}

export function shapeText(name: string, chains: ReadonlyArray<readonly [string, number]>, sets: ReadonlyArray<readonly [string, number]>): string {
  const part = (xs: ReadonlyArray<readonly [string, number]>): string => xs.map(([n, count]) => `${n}=${count}`).join(',');
  return sets.length > 0 ? `${name}:${part(chains)} sets:${part(sets)}` : `${name}:${part(chains)}`;
}

function quote(text: string): string {
  return `"${text.replace(/["\\]/g, '')}"`;
}
