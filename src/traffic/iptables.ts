/**
 * Installs flannel's masquerade and forward rules with iptables-restore, as every Kubernetes
 * network agent does, and keeps them: every `resyncMs` one iptables-save per table is compared
 * with what was installed (flanneld spawns `iptables -C` per rule), and the set is re-applied
 * if anything differs. Replacing the chain's contents also drops the rules of an old subnet.
 */
import { publish } from '../core/events.js';
import type { Logger } from '../core/log.js';
import { type Exec, execCommand, isMissingCommand } from './exec.js';
import { type RuleSet, iptablesCommand, iptablesRuleSets, othersRules, ownsRule, readChain, restorePayload, sharedRules, splitArgs } from './iptables-render.js';
import type { IptablesVariant } from './iptables-variant.js';
import { removeFlannelTables } from './nftables.js';
import { type FamilyTraffic, type TrafficManager, type TrafficOptions, resyncLoop } from './traffic-manager.js';

export interface IptablesOptions {
  readonly exec?: Exec;
  readonly log: Logger;
  readonly resyncMs: number;
  readonly rules: TrafficOptions;
  /** The host's iptables (iptables-variant.ts); plain `iptables` when undefined. */
  readonly variant?: IptablesVariant;
}

export class Iptables implements TrafficManager {
  readonly mode = 'iptables';
  readonly #exec: Exec;
  readonly #log: Logger;
  readonly #resyncMs: number;
  readonly #rules: TrafficOptions;
  readonly #variant: IptablesVariant | undefined;
  #sets: readonly RuleSet[] = [];
  /** What iptables-save showed for each chain right after it was installed. */
  readonly #installed = new Map<string, string>();

  constructor(options: IptablesOptions) {
    this.#exec = options.exec ?? execCommand;
    this.#log = options.log;
    this.#resyncMs = options.resyncMs;
    this.#rules = options.rules;
    this.#variant = options.variant;
  }

  /** flannel's nftables tables go (a node switched back from nftables mode); no other table is touched. */
  async removeOtherMode(): Promise<void> {
    try {
      await removeFlannelTables(this.#exec, this.#log);
    } catch (err) {
      if (!isMissingCommand(err)) throw err;
    }
  }

  /** Installs the rule sets of these families now (replacing earlier ones of the same chains). */
  async apply(families: readonly FamilyTraffic[]): Promise<void> {
    const sets = iptablesRuleSets(families, this.#rules);
    this.#sets = sets;
    for (const set of sets) await this.#install(set);
  }

  /** Re-checks every `resyncMs` until `signal` aborts. */
  run(signal: AbortSignal): Promise<void> {
    return resyncLoop(() => this.check(), this.#resyncMs, signal, (err) => this.#log.error({ err }, 'iptables resync failed'));
  }

  /** One resync pass: true when something had changed and was put back. */
  async check(): Promise<boolean> {
    let repaired = false;
    for (const set of this.#sets) {
      const state = readChain(await this.#save(set), set);
      if (!state.chainExists || state.jumps !== 1 || this.#reference(set, state.rules) !== this.#installed.get(key(set))) {
        this.#log.warn({ family: set.family, table: set.table, chain: set.chain }, 'iptables rules changed behind our back; re-applying');
        await this.#install(set);
        publish('rules.repair', { mode: 'iptables' });
        repaired = true;
      }
    }
    return repaired;
  }

  async #install(set: RuleSet): Promise<void> {
    const before = readChain(await this.#save(set), set);
    // A duplicate jump (e.g. from an older agent) goes; exactly one is kept.
    for (let i = 1; i < before.jumps; i++) await this.#exec(iptablesCommand(set.family, '', this.#variant), ['-w', '-t', set.table, '-D', set.parent, ...splitArgs(set.jump)]);
    // Another agent's rules (another network's, flannel's running.md) stay, as flanneld leaves them.
    const others = othersRules(set, before.rules);
    await this.#exec(iptablesCommand(set.family, '-restore', this.#variant), ['--noflush', '--wait'], restorePayload(set, { addJump: before.jumps === 0, others }));
    const after = readChain(await this.#save(set), set);
    // iptables-save is a second command: a listing without exactly the rules just written (someone
    // changed them in between) is not kept as the reference, so the next check writes again.
    const reference = this.#reference(set, after.rules);
    const complete = after.chainExists && after.jumps === 1 && reference === this.#reference(set, restoreOrder(set));
    this.#installed.set(key(set), complete ? reference : '');
    this.#log.info({ family: set.family, table: set.table, chain: set.chain, rules: after.rules.length }, 'iptables rules installed');
  }

  /**
   * What of a chain's listing is this agent's to keep as it wrote it: the shared rules at its head
   * and its own rules in order. Other agents' rules between them are theirs to check.
   */
  #reference(set: RuleSet, listed: readonly string[]): string {
    const shared = sharedRules(set);
    const others = new Set(othersRules(set, listed));
    return [...listed.slice(0, shared.length), '--', ...listed.slice(shared.length).filter((r) => !others.has(r))].join('\n');
  }

  #save(set: RuleSet): Promise<string> {
    return this.#exec(iptablesCommand(set.family, '-save', this.#variant), ['-t', set.table]);
  }
}

const key = (set: RuleSet): string => `${set.family} ${set.chain}`;

/** The chain's rules as restorePayload writes them, without other agents' rules. */
function restoreOrder(set: RuleSet): string[] {
  return [...sharedRules(set), ...set.rules.filter((r) => ownsRule(set, r))];
}
