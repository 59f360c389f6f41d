/**
 * The traffic manager port: flannel's masquerade and forward rules, described once per address
 * family and rendered by one of two implementations, iptables (iptables.ts) or nftables
 * (nftables.ts), as flannel 0.28's `EnableNFTables` chooses.
 */
import { delay } from '../core/abort.js';
import type { Cidr } from '../ip/cidr.js';
import type { Family } from '../ip/ip.js';

/** What one family asks for; both renderers work from this alone. */
export interface FamilyTraffic {
  readonly family: Family;
  /** The cluster network of the family (`<C>` in the spec). */
  readonly network: Cidr;
  /** This node's subnet (`<P>`); masquerade rules are made only when it is known. */
  readonly subnet?: Cidr;
}

export interface TrafficOptions {
  /** `--ip-masq`. */
  readonly masquerade: boolean;
  /** `--iptables-forward-rules`. */
  readonly forward: boolean;
  /** Not `--ip-masq-fully-random-disable`; a kernel that refuses it gets the rules without. */
  readonly randomFully: boolean;
}

export interface TrafficManager {
  /** `iptables` or `nftables`, for logs and `weft config check`. */
  readonly mode: 'iptables' | 'nftables';
  /** Removes what flannel's other mode left on this host, and nothing else (once, at start). */
  removeOtherMode(): Promise<void>;
  /** Installs the rules for these families now, replacing the earlier ones. */
  apply(families: readonly FamilyTraffic[]): Promise<void>;
  /** Re-checks the rules every resync period and restores what was changed, until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
  /** One such check: true when something had changed and was put back. */
  check(): Promise<boolean>;
}

/** Calls `check` every `periodMs` until `signal` aborts; a failed check is reported and retried next time. */
export async function resyncLoop(check: () => Promise<boolean>, periodMs: number, signal: AbortSignal, onError: (err: unknown) => void): Promise<void> {
  while (!signal.aborted) {
    try {
      await delay(periodMs, signal);
    } catch {
      return;
    }
    await check().catch((err: unknown) => {
      if (!signal.aborted) onError(err);
    });
  }
}
