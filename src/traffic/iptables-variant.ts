/**
 * Which iptables the host uses, legacy or nf_tables, decided as flannel's image decides it (its
 * iptables-wrapper, kubernetes-sigs/iptables-wrappers): kubelet's hint chains (KUBE-IPTABLES-HINT,
 * KUBE-KUBELET-CANARY) in the nf_tables mangle table, then anywhere in the legacy tables; a host
 * without kubelet (etcd mode, a Docker host) goes by where the rules are, as the wrapper's first
 * version did; with no sign at all, nf_tables. weft's rules must land where kube-proxy's and
 * Docker's are, or each half is invisible to the other's tools.
 */
import type { Exec } from './exec.js';

export type IptablesVariant = 'legacy' | 'nft';

/** What the saves showed; undefined where the tool is missing or failed. */
export interface VariantProbe {
  /** `iptables-nft-save -t mangle` and `ip6tables-nft-save -t mangle`. */
  readonly nftMangle: readonly (string | undefined)[];
  /** `iptables-legacy-save` and `ip6tables-legacy-save`, every table (`-t mangle` would create it). */
  readonly legacy: readonly (string | undefined)[];
  /** `iptables-nft-save` and `ip6tables-nft-save`, every table. */
  readonly nft: readonly (string | undefined)[];
}

export interface VariantChoice {
  /** undefined when the host has no variant commands (`iptables` is whatever it is). */
  readonly variant: IptablesVariant | undefined;
  /** Why, for the log, `weft doctor` and `weft config check`. */
  readonly why: string;
}

const hint = /^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY)\b/m;
const ruleCount = (saves: readonly (string | undefined)[]): number => saves.reduce((n, s) => n + (s?.split('\n').filter((l) => l.startsWith('-')).length ?? 0), 0);

const hinted = (saves: readonly (string | undefined)[]): boolean => saves.some((s) => s !== undefined && hint.test(s));
const nftHinted: VariantChoice = { variant: 'nft', why: 'kubelet\'s hint chain is in the nf_tables tables' };

export function chooseVariant(p: VariantProbe): VariantChoice {
  // A hint in nf_tables settles it: the nft commands are there, whatever else is.
  if (hinted(p.nftMangle)) return nftHinted;
  const present = (saves: readonly (string | undefined)[]): boolean => saves.some((s) => s !== undefined);
  if (!present(p.legacy) || !present(p.nft)) return { variant: undefined, why: 'this host has no iptables-legacy and iptables-nft commands: iptables as installed' };
  if (hinted(p.legacy)) return { variant: 'legacy', why: 'kubelet\'s hint chain is in the legacy tables' };
  const legacy = ruleCount(p.legacy);
  const nft = ruleCount(p.nft);
  if (legacy > nft) return { variant: 'legacy', why: `no kubelet hint; the legacy tables hold more rules (${legacy} against ${nft})` };
  return { variant: 'nft', why: nft > 0 ? `no kubelet hint; the nf_tables tables hold as many rules or more (${nft} against ${legacy})` : 'no kubelet hint and no rules anywhere: nf_tables' };
}

/**
 * Runs the saves and chooses. A save that fails counts as missing; nothing here throws. As the
 * wrapper does, a hint in the nf_tables mangle tables ends it there: on a kubelet's node the
 * other four saves (every table of both variants, kube-proxy's nat table among them) are not run.
 */
export async function detectIptablesVariant(exec: Exec): Promise<VariantChoice> {
  const save = (cmd: string, args: readonly string[] = []): Promise<string | undefined> => exec(cmd, args).catch(() => undefined);
  const nftMangle = [await save('iptables-nft-save', ['-t', 'mangle']), await save('ip6tables-nft-save', ['-t', 'mangle'])];
  if (hinted(nftMangle)) return nftHinted;
  const legacy = [await save('iptables-legacy-save'), await save('ip6tables-legacy-save')];
  const nft = [await save('iptables-nft-save'), await save('ip6tables-nft-save')];
  return chooseVariant({ nftMangle, legacy, nft });
}
