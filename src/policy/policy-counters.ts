/**
 * What the policy table has counted, read from its `nft -j` listing: per pod chain the packets it
 * rejected (enforcing) or would have (a dry run), from the chain's named counter, and in a dry run the (source, destination) pairs
 * behind them; and the running totals, kept across tables written over (whose counters start
 * from 0). Pure: the engine hands it the listing's items.
 */
import { type Family, formatIp, tryParseIp } from '../ip/ip.js';

export interface DeniedPair {
  /** `out`: the source's egress would not let it go; `in`: the destination's ingress would not let it in. */
  readonly tag: 'in' | 'out';
  readonly from: string;
  readonly to: string;
  readonly packets: number;
}

export interface PolicyCounters {
  /** Packets by pod chain (nft-render.ts podChain: `in-<hash>`, `out-<hash>`). */
  readonly chains: ReadonlyMap<string, number>;
  readonly pairs: readonly DeniedPair[];
}

const obj = (v: unknown): Record<string, unknown> | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
const packetsOf = (v: unknown): number => {
  const n = obj(obj(v)?.['counter'])?.['packets'];
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : 0;
};
const chainPattern = /^(?:in|out)-[0-9a-f]{16}$/;
const pairSet = /^dry-(in|out)(4|6)$/;

/** An address as a listing writes it, in weft's canonical form; undefined for anything else. */
function address(v: unknown, family: Family): string | undefined {
  const ip = typeof v === 'string' ? tryParseIp(v) : undefined;
  return ip?.family === family ? formatIp(ip) : undefined;
}

export function parsePolicyCounters(items: readonly unknown[]): PolicyCounters {
  const chains = new Map<string, number>();
  const pairs: DeniedPair[] = [];
  for (const item of items) {
    // A pod chain's named counter (nft-render.ts counterOf: `c-<chain>`).
    const counter = obj(obj(item)?.['counter']);
    const name = counter?.['name'];
    if (typeof name === 'string' && name.startsWith('c-') && chainPattern.test(name.slice(2))) {
      chains.set(name.slice(2), (chains.get(name.slice(2)) ?? 0) + packetsOf(item));
      continue;
    }
    const set = obj(obj(item)?.['set']);
    const m = typeof set?.['name'] === 'string' ? pairSet.exec(set['name']) : null;
    if (!m || !Array.isArray(set!['elem'])) continue;
    const family = Number(m[2]) as Family;
    for (const e of set!['elem'] as unknown[]) {
      const elem = obj(obj(e)?.['elem']);
      const concat = obj(elem?.['val'])?.['concat'];
      if (!Array.isArray(concat) || concat.length !== 2) continue;
      const [from, to] = [address(concat[0], family), address(concat[1], family)];
      const packets = packetsOf(elem);
      if (from && to && packets > 0) pairs.push({ tag: m[1] as 'in' | 'out', from, to, packets });
    }
  }
  return { chains, pairs };
}

/** Pairs kept for `weft status` at most (the kernel's set holds more; the chains count them all). */
const maxPairs = 4096;
const directionOf = { in: 'ingress', out: 'egress' } as const;
type Direction = 'ingress' | 'egress';

/** Totals since the agent started: what tables written over had counted, plus what the installed one has. */
export class DeniedCounts {
  /** By `<pod> <direction>`: what chains written over or deleted had counted. */
  readonly #before = new Map<string, number>();
  /** By chain: what the installed table's chains have counted. */
  #now = new Map<string, number>();
  readonly #pairsBefore = new Map<string, number>();
  #pairsNow = new Map<string, number>();
  /** The installed table's chains: chain name → `<pod> <direction>`. */
  #chains = new Map<string, string>();

  /** The chains of the table just installed, and whose they are. */
  installed(chains: ReadonlyMap<string, { readonly pod: string; readonly direction: Direction }>): void {
    this.#chains = new Map([...chains].map(([c, o]) => [c, `${o.pod} ${o.direction}`]));
  }

  /** What the installed table's listing says now (absolute counts of its chains and pair sets). */
  observe(items: readonly unknown[]): void {
    const counted = parsePolicyCounters(items);
    const now = new Map<string, number>();
    for (const [chain, n] of counted.chains) if (this.#chains.has(chain) && n > 0) now.set(chain, n);
    const pairs = new Map<string, number>();
    for (const p of counted.pairs) pairs.set(`${directionOf[p.tag]} ${p.from} ${p.to}`, p.packets);
    [this.#now, this.#pairsNow] = [now, pairs];
  }

  /** What the named counters say now, from a listing of them alone (the pairs are left as they were). */
  observeCounters(items: readonly unknown[]): void {
    const counted = parsePolicyCounters(items);
    const now = new Map<string, number>();
    for (const [chain, n] of counted.chains) if (this.#chains.has(chain) && n > 0) now.set(chain, n);
    this.#now = now;
  }

  /**
   * Keeps what chains counted before they are written over or deleted (which starts their
   * counters over): `all` for a table replaced whole (the pairs' sets too), else those chains.
   */
  fold(chains: 'all' | ReadonlySet<string>): void {
    for (const [chain, n] of this.#now) {
      if (chains !== 'all' && !chains.has(chain)) continue;
      const owner = this.#chains.get(chain);
      if (owner) this.#before.set(owner, (this.#before.get(owner) ?? 0) + n);
      this.#now.delete(chain);
    }
    if (chains !== 'all') return;
    for (const [k, n] of this.#pairsNow) {
      if (this.#pairsBefore.has(k) || this.#pairsBefore.size < maxPairs) this.#pairsBefore.set(k, (this.#pairsBefore.get(k) ?? 0) + n);
    }
    this.#pairsNow = new Map();
  }

  denied(): Array<{ pod: string; direction: Direction; packets: number }> {
    const all = new Map(this.#before);
    for (const [chain, n] of this.#now) {
      const owner = this.#chains.get(chain);
      if (owner) all.set(owner, (all.get(owner) ?? 0) + n);
    }
    return [...all].map(([key, packets]) => {
      const [pod, direction] = key.split(' ') as [string, Direction];
      return { pod, direction, packets };
    });
  }

  /** The pairs, the busiest first, each address named by `name` (a pod's `namespace/name`, or itself). */
  pairs(name: (address: string) => string): Array<{ direction: Direction; from: string; to: string; packets: number }> {
    const all = new Map(this.#pairsBefore);
    for (const [k, n] of this.#pairsNow) all.set(k, (all.get(k) ?? 0) + n);
    return [...all]
      .map(([key, packets]) => {
        const [direction, from, to] = key.split(' ') as [Direction, string, string];
        return { direction, from: name(from), to: name(to), packets };
      })
      .sort((a, b) => b.packets - a.packets);
  }
}
