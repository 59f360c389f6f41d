/**
 * One owner's nftables tables, kept as described: installed in one `nft -f` transaction, read back
 * (`nft -j list table`) and compared with the listing taken right after the install, and put back
 * the same way when they differ. Each owner (flannel's rules, a policy engine) keeps its own
 * tables and its own drift check; no owner touches another's tables. An owner's calls run one at
 * a time, in the order made: a check listing while a change is written would take the change for
 * drift.
 */
import type { Logger } from '../core/log.js';
import type { Exec } from './exec.js';
import { type OwnedTable, deleteTables, replaceTables, shapeText, tableShape, updateTable } from './nft-table.js';

/** An object a change wrote, to list again. */
interface Written {
  readonly table: OwnedTable;
  readonly kind: 'chain' | 'set' | 'map';
  readonly name: string;
}

/** What weft reads of an `nft -j` listing. */
interface NftItem {
  readonly metainfo?: unknown;
  readonly table?: { readonly name: string };
  readonly chain?: { readonly name: string };
  readonly rule?: { readonly chain: string };
  readonly set?: { readonly name: string; readonly elem?: readonly unknown[] };
  readonly map?: { readonly name: string; readonly elem?: readonly unknown[] };
}

/**
 * The tables as listed, object by object (`<table> chain <name>` with its rules, `<table> set
 * <name>`, `<table> map <name>`, `<table> table`): each as JSON without what changes with no one
 * changing anything (handles, counters, a dynamic set's elements), and its rule or element count.
 */
type Listing = Map<string, { readonly text: string; readonly count: number }>;

const normal = (item: unknown): string => JSON.stringify(item, (k, v: unknown) => (k === 'handle' || k === 'packets' || k === 'bytes' ? undefined : v));

export class NftOwner {
  readonly #exec: Exec;
  readonly #log: Logger;
  #tables: readonly OwnedTable[] = [];
  /** The tables as listed right after they were last written; undefined when that listing was not what was written. */
  #reference: Listing | undefined;
  /** The listing that follows a change in place, while it runs. */
  #relisting: Promise<void> | undefined;
  readonly #items = new Map<string, readonly unknown[]>();
  /** The last call, settled: the next one starts after it. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: { exec: Exec; log: Logger }) {
    this.#exec = options.exec;
    this.#log = options.log;
  }

  /** Makes the owner's tables exactly these, in one transaction; the listing that follows is the reference for `check`. */
  install(tables: readonly OwnedTable[]): Promise<void> {
    return this.#serial(() => this.#install(tables));
  }

  async #install(tables: readonly OwnedTable[]): Promise<void> {
    await this.#settle();
    this.#tables = tables;
    // Until the listing below, the kernel's tables are not known to be these: should the write
    // fail, the next update writes them whole rather than finding nothing to change.
    this.#reference = undefined;
    await this.#exec('nft', ['-f', '-'], replaceTables(tables));
    // The listing is a second command: someone may change the tables in between. Only a listing
    // with the shape just written becomes the reference; otherwise the next check writes again.
    this.#reference = this.#asWritten(await this.#list());
  }

  /**
   * Makes the owner's tables these by changing only what differs from the last ones written
   * (updateTable), in one transaction; replaces them whole where a difference cannot be written
   * as changes, where the kernel's tables are not known to be as written, or where the changes
   * fail. `updated` keeps the counters of unchanged chains; `replaced` starts every counter over.
   * Resolves once the change is in the kernel: listing again what it changed (the reference for
   * the drift check) follows, and the owner's next call waits for it. nft loads every set of the
   * table to list one chain, which at thousands of elements takes longer than the change.
   */
  update(tables: readonly OwnedTable[]): Promise<'updated' | 'replaced'> {
    return this.#serial(() => this.#update(tables));
  }

  async #update(tables: readonly OwnedTable[]): Promise<'updated' | 'replaced'> {
    await this.#settle();
    const changes = this.#reference && this.#tables.length === tables.length ? tables.map((t, i) => updateTable(this.#tables[i]!, t)) : [];
    if (changes.length === 0 || changes.some((x) => x === undefined)) {
      await this.#replace(tables);
      return 'replaced';
    }
    const text = changes.map((c) => c!.text).join('');
    this.#tables = tables;
    // Nothing differs: the reference listing is still the kernel's.
    if (text === '') return 'updated';
    try {
      await this.#exec('nft', ['-f', '-'], text);
    } catch (err) {
      this.#log.warn({ err, tables: tables.map((t) => t.name) }, 'changing the nftables tables in place failed; replacing them whole');
      await this.#replace(tables);
      return 'replaced';
    }
    const reference = new Map(this.#reference);
    const relist: Written[] = [];
    tables.forEach((t, i) => {
      const touched = changes[i]!.touched;
      for (const key of [...reference.keys()]) if (touched.gone.some((g) => key === `${t.name} ${g}`)) reference.delete(key);
      for (const o of touched.written) relist.push({ table: t, ...o });
    });
    this.#relisting = this.#relist(reference, relist);
    return 'updated';
  }

  /**
   * Lists again what a change wrote; the reference is unknown (the next check rewrites) until it
   * has. One object is listed by itself, more with the whole table: nft (1.0.6) answers several
   * list commands in one run from one cache filter for them all, so that a second object of a
   * kind is not found and a chain's rule lists without the set statement of a set not among them.
   */
  async #relist(reference: Listing, objects: readonly Written[]): Promise<void> {
    this.#reference = undefined;
    try {
      if (objects.length > 1) {
        this.#reference = this.#asWritten(await this.#list());
        return;
      }
      if (objects[0]) for (const [key, entry] of await this.#listObject(objects[0])) reference.set(key, entry);
      this.#reference = this.#asWritten(reference);
    } catch {
      // An object gone between the change and its listing: the whole listing decides.
      this.#reference = this.#asWritten(await this.#list().catch(() => new Map()));
    }
  }

  /** Writes the tables whole; `listed` keeps what they held before (their counts start over). */
  async #replace(tables: readonly OwnedTable[]): Promise<void> {
    if (this.#tables.length > 0) await this.#list().catch(() => undefined);
    const before = new Map(this.#items);
    await this.#install(tables);
    for (const [k, v] of before) this.#items.set(k, v);
  }

  /** Waits for the listing after the last change. */
  async #settle(): Promise<void> {
    const pending = this.#relisting;
    this.#relisting = undefined;
    await pending;
  }

  /** One drift check: true when the tables had changed and were written again. */
  check(): Promise<boolean> {
    return this.#serial(() => this.#check());
  }

  async #check(): Promise<boolean> {
    await this.#settle();
    const now = await this.#list();
    if (this.#reference && sameListing(now, this.#reference)) return false;
    this.#log.warn({ tables: this.#tables.map((t) => t.name), changed: this.#reference ? differing(now, this.#reference) : 'not known as written' }, 'nftables rules changed behind our back; re-applying');
    // What the check found stays what `listed` gives: the counts the repair is about to start over.
    const found = new Map(this.#items);
    await this.#install(this.#tables);
    for (const [k, v] of found) this.#items.set(k, v);
    return true;
  }

  /** Deletes these tables where they exist. */
  remove(tables: ReadonlyArray<Pick<OwnedTable, 'family' | 'name'>>): Promise<void> {
    return this.#serial(async () => {
      await this.#settle();
      await this.#exec('nft', ['-f', '-'], deleteTables(tables));
    });
  }

  /** The listing, if it has the shape just written (tableShape); else undefined. */
  #asWritten(listing: Listing): Listing | undefined {
    const shape = this.#tables.map((t) => {
      const of = (kind: string): Array<[string, number]> =>
        [...listing].filter(([k]) => k.startsWith(`${t.name} ${kind} `)).map(([k, e]) => [k.slice(`${t.name} ${kind} `.length), e.count]);
      return listing.has(`${t.name} table`) ? shapeText(t.name, of('chain'), [...of('set'), ...of('map')]) : `${t.name}: missing`;
    });
    return shape.join(' ') === this.#tables.map(tableShape).join(' ') ? listing : undefined;
  }

  /**
   * The items of a table as the last full listing found them (a check's, before any repair it
   * made), counters included: a reader of counters need not list a large table a second time.
   */
  listed(table: Pick<OwnedTable, 'name'>): readonly unknown[] {
    return this.#items.get(table.name) ?? [];
  }

  /** The owner's tables as listed now. */
  async #list(): Promise<Listing> {
    const listing: Listing = new Map();
    this.#items.clear();
    for (const t of this.#tables) {
      let text: string;
      try {
        text = await this.#exec('nft', ['-j', 'list', 'table', t.family, t.name]);
      } catch {
        continue;
      }
      const items = ((JSON.parse(text) as { nftables?: NftItem[] }).nftables ?? []).filter((i) => !('metainfo' in i));
      this.#items.set(t.name, items);
      this.#add(listing, t, items);
    }
    return listing;
  }

  /** One object of a table as listed now; throws when it is missing. */
  async #listObject(o: Written): Promise<Listing> {
    const listing: Listing = new Map();
    const out = await this.#exec('nft', ['-j', 'list', o.kind, o.table.family, o.table.name, o.name]);
    this.#add(listing, o.table, (JSON.parse(out) as { nftables?: NftItem[] }).nftables ?? []);
    return listing;
  }

  /** Runs `call` after every call made before it has settled. */
  #serial<T>(call: () => Promise<T>): Promise<T> {
    const result = this.#queue.then(call);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  #add(listing: Listing, t: OwnedTable, items: readonly NftItem[]): void {
    const dynamic = new Set((t.sets ?? []).filter((x) => x.dynamic).map((x) => x.name));
    const chains = new Map<string, string[]>();
    for (const i of items) {
      if ('metainfo' in i) continue;
      if (i.table) listing.set(`${t.name} table`, { text: normal(i), count: 0 });
      else if (i.chain) chains.set(i.chain.name, [normal(i)]);
      else if (i.rule) chains.get(i.rule.chain)?.push(normal(i));
      else if (i.set || i.map) {
        const o = (i.set ?? i.map)!;
        // Counters count and dynamic sets fill as packets pass: neither is drift.
        const item = i.set && dynamic.has(o.name) ? { set: { ...i.set, elem: [] } } : i;
        listing.set(`${t.name} ${i.set ? 'set' : 'map'} ${o.name}`, { text: normal(item), count: item === i ? (o.elem?.length ?? 0) : 0 });
      }
    }
    for (const [name, parts] of chains) listing.set(`${t.name} chain ${name}`, { text: parts.join('\n'), count: parts.length - 1 });
  }
}

function sameListing(a: Listing, b: Listing): boolean {
  if (a.size !== b.size) return false;
  for (const [k, e] of a) if (b.get(k)?.text !== e.text) return false;
  return true;
}

/** The objects (`<table> chain <name>`, ...) that differ between two listings, at most eight: what the log names. */
function differing(a: Listing, b: Listing): string[] {
  return [...new Set([...a.keys(), ...b.keys()])].filter((k) => a.get(k)?.text !== b.get(k)?.text).slice(0, 8);
}
