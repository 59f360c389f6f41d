/**
 * What the policy table has counted, read from its `nft -j` listing: per pod chain the packets it
 * rejected (enforcing) or would have (a dry run), and in a dry run the (source, destination) pairs
 * behind them. Pure: the engine hands it the listing's items.
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
    const rule = obj(obj(item)?.['rule']);
    const chain = rule?.['chain'];
    if (typeof chain === 'string' && chainPattern.test(chain) && Array.isArray(rule!['expr'])) {
      const n = (rule!['expr'] as unknown[]).reduce<number>((sum, e) => sum + packetsOf(e), 0);
      chains.set(chain, (chains.get(chain) ?? 0) + n);
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
