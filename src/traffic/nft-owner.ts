/**
 * One owner's nftables tables, kept as described: installed in one `nft -f` transaction, read back
 * (`nft -j list table`) and compared with the listing taken right after the install, and put back
 * the same way when they differ. Each owner (flannel's rules, a policy engine) keeps its own
 * tables and its own drift check; no owner touches another's tables.
 */
import type { Logger } from '../core/log.js';
import type { Exec } from './exec.js';
import { type OwnedTable, deleteTables, replaceTables, shapeText, tableShape, updateTable } from './nft-table.js';

/** What weft reads of an `nft -j` listing. */
interface NftItem {
  readonly metainfo?: unknown;
  readonly chain?: { readonly name: string };
  readonly rule?: { readonly chain: string };
  readonly set?: { readonly name: string; readonly elem?: readonly unknown[] };
  readonly map?: { readonly name: string; readonly elem?: readonly unknown[] };
}

export class NftOwner {
  readonly #exec: Exec;
  readonly #log: Logger;
  #tables: readonly OwnedTable[] = [];
  /** The tables as `nft -j` listed them right after the last install, handles left out; '' when that listing was not what was written. */
  #installed = '';

  constructor(options: { exec: Exec; log: Logger }) {
    this.#exec = options.exec;
    this.#log = options.log;
  }

  /** Makes the owner's tables exactly these, in one transaction; the listing that follows is the reference for `check`. */
  async install(tables: readonly OwnedTable[]): Promise<void> {
    this.#tables = tables;
    await this.#exec('nft', ['-f', '-'], replaceTables(tables));
    const now = await this.#list();
    // The listing is a second command: someone may change the tables in between. Only a listing
    // with the shape just written becomes the reference; otherwise the next check writes again.
    this.#installed = now.shape === tables.map(tableShape).join(' ') ? now.text : '';
  }

  /**
   * Makes the owner's tables these by changing only what differs from the last ones written
   * (updateTable), in one transaction; replaces them whole where a difference cannot be written
   * as changes, where the kernel's tables are not known to be as written, or where the changes
   * fail. `updated` keeps the counters of unchanged chains; `replaced` starts every counter over.
   */
  async update(tables: readonly OwnedTable[]): Promise<'updated' | 'replaced'> {
    const texts = this.#installed !== '' && this.#tables.length === tables.length ? tables.map((t, i) => updateTable(this.#tables[i]!, t)) : [];
    if (texts.length === 0 || texts.some((x) => x === undefined)) {
      await this.install(tables);
      return 'replaced';
    }
    const text = texts.join('');
    if (text === '') {
      // Nothing differs: the reference listing is still the kernel's.
      this.#tables = tables;
      return 'updated';
    }
    try {
      await this.#exec('nft', ['-f', '-'], text);
    } catch (err) {
      this.#log.warn({ err, tables: tables.map((t) => t.name) }, 'changing the nftables tables in place failed; replacing them whole');
      await this.install(tables);
      return 'replaced';
    }
    this.#tables = tables;
    const now = await this.#list();
    this.#installed = now.shape === tables.map(tableShape).join(' ') ? now.text : '';
    return 'updated';
  }

  /** One drift check: true when the tables had changed and were written again. */
  async check(): Promise<boolean> {
    if ((await this.#list()).text === this.#installed) return false;
    this.#log.warn({ tables: this.#tables.map((t) => t.name) }, 'nftables rules changed behind our back; re-applying');
    await this.install(this.#tables);
    return true;
  }

  /** The items of one of the owner's tables as `nft -j` lists them now (counters and dynamic sets included); none when it is missing. */
  async read(table: Pick<OwnedTable, 'family' | 'name'>): Promise<readonly unknown[]> {
    let listing: string;
    try {
      listing = await this.#exec('nft', ['-j', 'list', 'table', table.family, table.name]);
    } catch {
      return [];
    }
    return ((JSON.parse(listing) as { nftables?: unknown[] }).nftables ?? []).filter((i) => !(typeof i === 'object' && i !== null && 'metainfo' in i));
  }

  /** Deletes these tables where they exist. */
  async remove(tables: ReadonlyArray<Pick<OwnedTable, 'family' | 'name'>>): Promise<void> {
    await this.#exec('nft', ['-f', '-'], deleteTables(tables));
  }

  /**
   * The owner's tables in nft's JSON, without the handles (which change on every install) and
   * metadata, and their shape as tableShape describes one.
   */
  async #list(): Promise<{ text: string; shape: string }> {
    const texts: string[] = [];
    const shapes: string[] = [];
    for (const t of this.#tables) {
      let listing: string;
      try {
        listing = await this.#exec('nft', ['-j', 'list', 'table', t.family, t.name]);
      } catch {
        texts.push(`${t.name}: missing`);
        shapes.push(`${t.name}: missing`);
        continue;
      }
      const dynamic = new Set((t.sets ?? []).filter((s) => s.dynamic).map((s) => s.name));
      // Counters count and dynamic sets fill as packets pass: neither is drift.
      const items = ((JSON.parse(listing) as { nftables?: NftItem[] }).nftables ?? [])
        .filter((i) => !('metainfo' in i))
        .map((i): NftItem => (i.set && dynamic.has(i.set.name) ? { set: { ...i.set, elem: [] } } : i));
      texts.push(JSON.stringify(items, (k, v: unknown) => (k === 'handle' || k === 'packets' || k === 'bytes' ? undefined : v)));
      const chains = items.flatMap((i) => (i.chain ? [i.chain.name] : []));
      const sets = items.flatMap((i): Array<[string, number]> => {
        const s = i.set ?? i.map;
        return s ? [[s.name, s.elem?.length ?? 0]] : [];
      });
      shapes.push(shapeText(t.name, chains.map((c) => [c, items.filter((i) => i.rule?.chain === c).length]), sets));
    }
    return { text: texts.join('\n'), shape: shapes.join(' ') };
  }
}
