/**
 * The entries that the accepted peers (and the node itself) ask for, indexed the way the
 * reconciler compares them with the kernel: per entry kind, by that kind's key. Pure: no I/O.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { EntryKind } from './entry-kind.js';
import { type KeptProgram, entriesOfKind, forEachOfKind, wantsEntry } from './kept-program.js';

/**
 * Entries by key. Two peers may want an entry under one key (two leases with one VtepMAC): the
 * one added last counts, and removing it brings back the other. A key with one entry (nearly all
 * of them) holds it directly; only shared keys hold a list, which saves an array per entry.
 */
export class EntryIndex<T extends object> {
  readonly #byKey = new Map<string, T | Shared<T>>();
  readonly #key: (entry: T) => string;

  constructor(key: (entry: T) => string) {
    this.#key = key;
  }

  get size(): number {
    return this.#byKey.size;
  }

  get(key: string): T | undefined {
    const v = this.#byKey.get(key);
    return v instanceof Shared ? v.entries.at(-1) : v;
  }

  /** The oldest entry wanted under `key` that passes `test`; allocates nothing. */
  find(key: string, test: (entry: T) => boolean): T | undefined {
    const v = this.#byKey.get(key);
    if (v === undefined) return undefined;
    if (!(v instanceof Shared)) return test(v) ? v : undefined;
    for (const e of v.entries) if (test(e)) return e;
    return undefined;
  }

  has(key: string): boolean {
    return this.#byKey.has(key);
  }

  *[Symbol.iterator](): IterableIterator<[string, T]> {
    for (const [key, v] of this.#byKey) yield [key, v instanceof Shared ? v.entries[v.entries.length - 1]! : v];
  }

  add(entry: T): void {
    const key = this.#key(entry);
    const v = this.#byKey.get(key);
    if (v === undefined) this.#byKey.set(key, entry);
    else if (v instanceof Shared) v.entries.push(entry);
    else this.#byKey.set(key, new Shared([v, entry]));
  }

  /** Removes this very entry (by identity). */
  remove(entry: T): void {
    const key = this.#key(entry);
    const v = this.#byKey.get(key);
    if (v === entry) {
      this.#byKey.delete(key);
      return;
    }
    if (!(v instanceof Shared)) return;
    const at = v.entries.lastIndexOf(entry);
    if (at < 0) return;
    v.entries.splice(at, 1);
    if (v.entries.length === 1) this.#byKey.set(key, v.entries[0]!);
  }
}

/** The entries of a key that several peers want, oldest first. */
class Shared<T> {
  readonly entries: T[];

  constructor(entries: T[]) {
    this.entries = entries;
  }
}

/** An entry a program wants that another program already wants in another form. */
export interface Conflict {
  readonly kind: EntryKind;
  readonly entry: object;
  /** The form already wanted (the established program's entry). */
  readonly theirs: object;
}

/** The union of the programs of all accepted peers, per kind, kept up to date as peers come and go. */
export class DesiredState {
  readonly #byKind = new Map<string, EntryIndex<object>>();
  readonly #kinds: readonly EntryKind[];

  constructor(kinds: readonly EntryKind[]) {
    this.#kinds = kinds;
    for (const kind of kinds) this.#byKind.set(kind.name, new EntryIndex((e) => kind.key(e)));
  }

  /**
   * The first entry of `program`, of an exclusive kind, that another program wants in another
   * form; entries of `replacing` (the same peer's program before its lease changed) do not count.
   */
  conflict(program: KeptProgram, replacing?: KeptProgram): Conflict | undefined {
    for (const kind of this.#kinds) {
      if (!kind.exclusive) continue;
      const index = this.#index(kind.name);
      // Checked for every lease in the start-up burst: a program has a handful of entries, so
      // its own earlier ones are searched rather than made into a set.
      for (const entry of entriesOfKind(program, kind.name)) {
        const theirs = index.find(kind.key(entry), (e) => !(replacing && wantsEntry(replacing, kind.name, e)) && !kind.matches(entry, e));
        if (theirs) return { kind, entry, theirs };
      }
    }
    return undefined;
  }

  /** The wanted entries of one kind. */
  of(kind: EntryKind): EntryIndex<object> {
    return this.#index(kind.name);
  }

  add(program: KeptProgram): void {
    for (const name in program) {
      const index = this.#index(name);
      forEachOfKind(program, name, (e) => index.add(e));
    }
  }

  remove(program: KeptProgram): void {
    for (const name in program) {
      const index = this.#index(name);
      forEachOfKind(program, name, (e) => index.remove(e));
    }
  }

  #index(name: string): EntryIndex<object> {
    const index = this.#byKind.get(name);
    if (!index) throw new WeftError(ErrorCodes.INTERNAL, `a program names the entry kind "${name}", which its backend does not declare`);
    return index;
  }
}
