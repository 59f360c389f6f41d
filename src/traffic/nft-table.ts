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
  /**
   * Filled by the rules (`update @set { ... counter }`), not by the owner: elements expire after
   * `timeoutS` and the set holds at most `size`; a listing's elements of it are not drift.
   */
  readonly dynamic?: { readonly timeoutS: number; readonly size: number };
}

export interface OwnedTable {
  readonly family: 'ip' | 'ip6' | 'inet';
  readonly name: string;
  readonly comment?: string;
  readonly sets?: readonly NftSet[];
  /**
   * Named counters (`counter name "<name>"` in rules): they count on when the chains using them
   * are written over, so a change in place loses no count.
   */
  readonly counters?: readonly string[];
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
    for (const c of t.counters ?? []) lines.push(`  counter ${c} {`, '  }');
    for (const s of t.sets ?? []) {
      lines.push(`  ${s.map ? 'map' : 'set'} ${s.name} {`, `    type ${s.type}`);
      const flags = [...(s.flags ?? []), ...(s.dynamic ? ['dynamic', 'timeout'] : [])];
      if (flags.length) lines.push(`    flags ${flags.join(', ')}`);
      if (s.dynamic) lines.push(`    timeout ${s.dynamic.timeoutS}s`, `    size ${s.dynamic.size}`);
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

/**
 * The transaction that turns the table `before` (as installed) into `after` by changing only what
 * differs: new chains and sets added, changed sets flushed and filled, changed chains flushed and
 * written, verdict-map elements added and deleted one by one, and what is gone deleted after
 * nothing refers to it any more. Unchanged chains keep their counters and dynamic sets their
 * elements. Undefined when only a replacement can do it: another table, a changed base chain, or a
 * set whose declaration changed.
 */
export interface TableUpdate {
  readonly text: string;
  /** What the transaction writes (to list again afterwards) and what it deletes (`chain <name>`, `set <name>`, `map <name>`). */
  readonly touched: { readonly written: ReadonlyArray<{ readonly kind: 'chain' | 'set' | 'map'; readonly name: string }>; readonly gone: readonly string[] };
}

export function updateTable(before: OwnedTable, after: OwnedTable): TableUpdate | undefined {
  if (before.family !== after.family || before.name !== after.name || before.comment !== after.comment) return undefined;
  const t = `${after.family} ${after.name}`;
  const oldChains = new Map(before.chains.map((c) => [c.name, c]));
  const newChains = new Map(after.chains.map((c) => [c.name, c]));
  const oldSets = new Map((before.sets ?? []).map((x) => [x.name, x]));
  const newSets = new Map((after.sets ?? []).map((x) => [x.name, x]));
  for (const [name, c] of newChains) {
    const o = oldChains.get(name);
    if (o && (JSON.stringify(o.base) !== JSON.stringify(c.base) || o.comment !== c.comment)) return undefined;
    if (!o && c.base) return undefined;
  }
  for (const [name, o] of oldChains) if (!newChains.has(name) && o.base) return undefined;
  for (const [name, x] of newSets) {
    const o = oldSets.get(name);
    if (o && setHead(o) !== setHead(x)) return undefined;
  }
  const lines: string[] = [];
  const oldCounters = new Set(before.counters ?? []);
  const newCounters = new Set(after.counters ?? []);
  for (const c of newCounters) if (!oldCounters.has(c)) lines.push(`add counter ${t} ${c}`);
  const written = new Map<string, { kind: 'chain' | 'set' | 'map'; name: string }>();
  const wrote = (kind: 'chain' | 'set' | 'map', name: string): void => void written.set(`${kind} ${name}`, { kind, name });
  for (const c of after.chains) {
    if (oldChains.has(c.name)) continue;
    lines.push(`add chain ${t} ${c.name}${c.comment ? ` { comment ${quote(c.comment)}; }` : ''}`);
    wrote('chain', c.name);
  }
  for (const x of after.sets ?? []) {
    if (oldSets.has(x.name)) continue;
    lines.push(`add ${x.map ? 'map' : 'set'} ${t} ${x.name} { ${setHead(x)} }`);
    wrote(x.map ? 'map' : 'set', x.name);
  }
  const filled = (x: NftSet): void => {
    if (x.elements.length > 0) lines.push(`add element ${t} ${x.name} { ${x.elements.join(', ')} }`);
    wrote('set', x.name);
  };
  for (const x of after.sets ?? []) {
    if (x.map || x.dynamic) continue;
    const o = oldSets.get(x.name);
    if (!o) filled(x);
    else if (o.elements.join() !== x.elements.join()) {
      lines.push(`flush set ${t} ${x.name}`);
      filled(x);
    }
  }
  for (const c of after.chains) {
    const o = oldChains.get(c.name);
    if (o && o.rules.join('\n') === c.rules.join('\n')) continue;
    if (o) lines.push(`flush chain ${t} ${c.name}`);
    for (const r of c.rules) lines.push(`add rule ${t} ${c.name} ${r}`);
    wrote('chain', c.name);
  }
  for (const x of after.sets ?? []) {
    if (!x.map) continue;
    const had = new Map((oldSets.get(x.name)?.elements ?? []).map((e) => [mapKey(e), e]));
    const has = new Map(x.elements.map((e) => [mapKey(e), e]));
    const gone = [...had].filter(([k, e]) => has.get(k) !== e).map(([k]) => k);
    const added = [...has].filter(([k, e]) => had.get(k) !== e).map(([, e]) => e);
    if (gone.length > 0) lines.push(`delete element ${t} ${x.name} { ${gone.join(', ')} }`);
    if (added.length > 0) lines.push(`add element ${t} ${x.name} { ${added.join(', ')} }`);
    if (gone.length > 0 || added.length > 0) wrote('map', x.name);
  }
  const goneObjects: string[] = [];
  for (const [name, o] of oldSets) {
    if (o.map && !newSets.has(name)) {
      lines.push(`delete map ${t} ${name}`);
      goneObjects.push(`map ${name}`);
    }
  }
  for (const name of oldChains.keys()) {
    if (newChains.has(name)) continue;
    lines.push(`delete chain ${t} ${name}`);
    goneObjects.push(`chain ${name}`);
  }
  for (const [name, o] of oldSets) {
    if (o.map || newSets.has(name)) continue;
    lines.push(`delete set ${t} ${name}`);
    goneObjects.push(`set ${name}`);
  }
  for (const c of oldCounters) if (!newCounters.has(c)) lines.push(`delete counter ${t} ${c}`);
  return { text: lines.length > 0 ? lines.join('\n') + '\n' : '', touched: { written: [...written.values()], gone: goneObjects } };
}

/** A set's declaration, as one line: what it holds and how; its elements apart. */
function setHead(x: NftSet): string {
  const flags = [...(x.flags ?? []), ...(x.dynamic ? ['dynamic', 'timeout'] : [])];
  return [`type ${x.type};`, flags.length ? `flags ${flags.join(', ')};` : '', x.dynamic ? `timeout ${x.dynamic.timeoutS}s; size ${x.dynamic.size};` : ''].filter(Boolean).join(' ');
}

/** A map element's key: what comes before ` : `. */
const mapKey = (element: string): string => element.slice(0, element.indexOf(' : ') >= 0 ? element.indexOf(' : ') : undefined);

/** Deletes the tables where they exist, and nothing else. */
export function deleteTables(tables: ReadonlyArray<Pick<OwnedTable, 'family' | 'name'>>): string {
  return tables.flatMap((t) => [`add table ${t.family} ${t.name}`, `delete table ${t.family} ${t.name}`]).join('\n') + '\n';
}

/** What a listing of the table must show: its chains with their rule counts, its sets with their element counts. */
export function tableShape(t: OwnedTable): string {
  return shapeText(t.name, t.chains.map((c) => [c.name, c.rules.length]), (t.sets ?? []).map((s) => [s.name, s.elements.length]));
}

export function shapeText(name: string, chains: ReadonlyArray<readonly [string, number]>, sets: ReadonlyArray<readonly [string, number]>): string {
  // Sorted: a table changed in place lists what it gained after what it had.
  const part = (xs: ReadonlyArray<readonly [string, number]>): string => xs.map(([n, count]) => `${n}=${count}`).sort().join(',');
  return sets.length > 0 ? `${name}:${part(chains)} sets:${part(sets)}` : `${name}:${part(chains)}`;
}

function quote(text: string): string {
  return `"${text.replace(/["\\]/g, '')}"`;
}
