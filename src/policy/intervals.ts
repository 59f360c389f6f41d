/**
 * Address ranges as closed intervals of one family, for nftables' interval sets: a union of
 * blocks minus their excepts, merged. Pure.
 */
import { type Cidr, lastIp } from '../ip/cidr.js';
import type { Family } from '../ip/ip.js';

export interface Interval {
  readonly family: Family;
  readonly first: bigint;
  readonly last: bigint;
}

export const intervalOf = (c: Cidr): Interval => ({ family: c.ip.family, first: c.ip.value, last: lastIp(c).value });

/** `block` without `holes` (all of its family). */
export function subtract(block: Interval, holes: readonly Interval[]): Interval[] {
  let out: Interval[] = [block];
  for (const h of holes) {
    if (h.family !== block.family) continue;
    out = out.flatMap((i) => {
      if (h.last < i.first || h.first > i.last) return [i];
      const parts: Interval[] = [];
      if (h.first > i.first) parts.push({ family: i.family, first: i.first, last: h.first - 1n });
      if (h.last < i.last) parts.push({ family: i.family, first: h.last + 1n, last: i.last });
      return parts;
    });
  }
  return out;
}

/** The union, sorted, with touching and overlapping intervals merged (what an interval set accepts). */
export function merge(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].sort((a, b) => a.family - b.family || (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const out: Interval[] = [];
  for (const i of sorted) {
    const prev = out[out.length - 1];
    if (prev && prev.family === i.family && i.first <= prev.last + 1n) {
      if (i.last > prev.last) out[out.length - 1] = { ...prev, last: i.last };
    } else {
      out.push(i);
    }
  }
  return out;
}
