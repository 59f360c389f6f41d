/**
 * flannel's masquerade and forward rules, described once per address family (spec §8.1, §8.2,
 * §8.5), as data that both renderers read: iptables text (iptables-render.ts) and nftables text
 * (nft-rules.ts). flannel's two modes agree on every rule but one, which each writes its own way;
 * the description carries both forms of that one, so that each mode's rules stay text for text
 * what a flanneld of that mode writes and recognises. Pure.
 */
import type { Cidr } from '../ip/cidr.js';
import type { FamilyTraffic, TrafficOptions } from './traffic-manager.js';

/** What a rule tests: the source or destination address in a network (or not), or kube-proxy's mark. */
export type Match =
  | { readonly on: 'src' | 'dst'; readonly cidr: Cidr; readonly not?: boolean }
  /** The packet carries this mark bit (kube-proxy's "masquerade me": iptables masks, nft compares). */
  | { readonly on: 'mark'; readonly mark: number };

export type Verdict = 'return' | 'accept' | 'masquerade' | 'masquerade-fully-random';

export interface Rule {
  readonly match: readonly Match[];
  /** flannel's nftables mode writes this rule with other matches (the one place its modes differ). */
  readonly nftMatch?: readonly Match[];
  readonly verdict: Verdict;
}

/** One of flannel's chains: where it hooks in, how each mode names it, and its rules in order. */
export interface Chain {
  readonly hook: 'postrouting' | 'forward';
  readonly iptables: { readonly chain: string; readonly table: 'nat' | 'filter'; readonly parent: 'POSTROUTING' | 'FORWARD'; readonly comment: string };
  readonly nft: { readonly chain: string; readonly comment: string; readonly type: 'nat' | 'filter'; readonly priority: 'srcnat' | 'filter' };
  readonly rules: readonly Rule[];
}

export const masqChain = 'FLANNEL-POSTRTG';
export const forwardChain = 'FLANNEL-FWD';
/** kube-proxy's masquerade mark: traffic it will masquerade itself is not masqueraded twice. */
const kubeProxyMark = 0x4000;

/** The chains of one family: masquerade (with `--ip-masq`, once the subnet is known), then forward. */
export function flannelChains(f: FamilyTraffic, options: TrafficOptions): Chain[] {
  const c = f.network;
  const chains: Chain[] = [];
  if (options.masquerade && f.subnet) {
    const p = f.subnet;
    const multicast: Cidr = f.family === 4 ? { ip: { family: 4, value: 0xe0000000n }, prefix: 4 } : { ip: { family: 6, value: 0xffn << 120n }, prefix: 8 };
    const masquerade: Verdict = options.randomFully ? 'masquerade-fully-random' : 'masquerade';
    chains.push({
      hook: 'postrouting',
      iptables: { chain: masqChain, table: 'nat', parent: 'POSTROUTING', comment: 'flanneld masq' },
      nft: { chain: 'postrtg', comment: 'chain to manage traffic masquerading by flannel', type: 'nat', priority: 'srcnat' },
      rules: [
        { match: [{ on: 'mark', mark: kubeProxyMark }], verdict: 'return' },
        { match: [{ on: 'src', cidr: p }, { on: 'dst', cidr: c }], verdict: 'return' },
        { match: [{ on: 'src', cidr: c }, { on: 'dst', cidr: p }], verdict: 'return' },
        // Not from the cluster to this node: iptables writes `! -s <C> -d <P>`, nftables
        // `saddr != <P> daddr <C>` (spec §8.5); each mode keeps its own.
        { match: [{ on: 'src', cidr: c, not: true }, { on: 'dst', cidr: p }], nftMatch: [{ on: 'src', cidr: p, not: true }, { on: 'dst', cidr: c }], verdict: 'return' },
        { match: [{ on: 'src', cidr: c }, { on: 'dst', cidr: multicast, not: true }], verdict: masquerade },
        { match: [{ on: 'src', cidr: c, not: true }, { on: 'dst', cidr: c }], verdict: masquerade },
      ],
    });
  }
  if (options.forward) {
    chains.push({
      hook: 'forward',
      iptables: { chain: forwardChain, table: 'filter', parent: 'FORWARD', comment: 'flanneld forward' },
      nft: { chain: 'forward', comment: 'chain to accept flannel traffic', type: 'filter', priority: 'filter' },
      rules: [
        { match: [{ on: 'src', cidr: c }], verdict: 'accept' },
        { match: [{ on: 'dst', cidr: c }], verdict: 'accept' },
      ],
    });
  }
  return chains;
}
