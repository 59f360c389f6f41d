/**
 * A program as the reconciler keeps it for as long as its peer lives. A kind with one entry (nearly
 * all of them: a vxlan peer wants one neighbour, one FDB entry and one route) holds that entry as
 * itself rather than in a list of one: an array fewer per kind and peer, 15 000 at 5000 peers
 * (docs/benchmarks.md, the compact peer). Entries are records, never arrays (entry-kind.ts), so a
 * list and a lone entry are told apart by Array.isArray. Pure.
 */
import type { Program } from './entry-kind.js';

/** Entries by kind name: a list, or a lone entry as itself. A Program is one too. */
export type KeptProgram = { readonly [kind: string]: object | readonly object[] | undefined };

/** The program with each one-entry list replaced by its entry; the entries themselves are the program's (the desired state tells them apart by identity). */
export function keep(program: Program): KeptProgram {
  const out: Record<string, object | readonly object[]> = {};
  for (const kind in program) {
    const list = program[kind];
    if (list) out[kind] = list.length === 1 ? list[0]! : list;
  }
  return out;
}

/** The entries of one kind; allocates for a lone entry, so for the paths that run per event, not per peer of a burst. */
export function entriesOfKind(program: KeptProgram, kind: string): readonly object[] {
  const v = program[kind];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

/** Calls `fn` on each entry of one kind; allocates nothing. */
export function forEachOfKind(program: KeptProgram, kind: string, fn: (entry: object) => void): void {
  const v = program[kind];
  if (v === undefined) return;
  if (Array.isArray(v)) for (const e of v as readonly object[]) fn(e);
  else fn(v);
}

/** Whether the program wants this very entry (by identity) under that kind. */
export function wantsEntry(program: KeptProgram, kind: string, entry: object): boolean {
  const v = program[kind];
  return v === entry || (Array.isArray(v) && (v as readonly object[]).includes(entry));
}
