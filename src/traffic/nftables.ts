/**
 * flannel's rules in nftables mode (`"EnableNFTables": true`, spec §8.5): its two tables, one
 * owner's (nft-owner.ts), written in one `nft -f -` transaction, so a changed lease or config
 * replaces the rules atomically. Better than flanneld, which never looks at its tables again:
 * every resync period the tables are read back and compared with what was installed, and a rule
 * or table deleted by hand is put back the same way.
 */
import { publish } from '../core/events.js';
import { ErrorCodes, WeftError, errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { type Exec, execCommand, isMissingCommand } from './exec.js';
import { iptablesCommand, readChain, splitArgs } from './iptables-render.js';
import type { IptablesVariant } from './iptables-variant.js';
import { NftOwner } from './nft-owner.js';
import { flannelTableNames, flannelTables, nftMasqueradeProbe } from './nft-rules.js';
import { forwardChain, masqChain } from './traffic-rules.js';
import { type FamilyTraffic, type TrafficManager, type TrafficOptions, resyncLoop } from './traffic-manager.js';

export interface NftablesOptions {
  readonly exec?: Exec;
  readonly log: Logger;
  readonly resyncMs: number;
  readonly rules: TrafficOptions;
}

/** What the dry run said of `masquerade fully-random`. */
export type FullyRandomProbe = 'accepted' | 'refused' | 'probe-failed' | 'not-asked';

export class Nftables implements TrafficManager {
  readonly mode = 'nftables';
  readonly #exec: Exec;
  readonly #log: Logger;
  readonly #resyncMs: number;
  readonly #owner: NftOwner;
  #rules: TrafficOptions;
  #probe: FullyRandomProbe = 'not-asked';

  private constructor(options: NftablesOptions) {
    this.#exec = options.exec ?? execCommand;
    this.#log = options.log;
    this.#resyncMs = options.resyncMs;
    this.#rules = options.rules;
    this.#owner = new NftOwner({ exec: this.#exec, log: this.#log });
  }

  /**
   * Checks that `nft` is there (WEFT_ERR_CONFIG saying what to install when it is not) and whether
   * the kernel takes `fully-random`, which flannel drops when a dry run refuses it. A dry run that
   * fails without fully-random as well says nothing about fully-random: it is kept, and the
   * failure reported (the install will name what is wrong).
   */
  static async create(options: NftablesOptions): Promise<Nftables> {
    const nft = new Nftables(options);
    try {
      await nft.#exec('nft', ['--version']);
    } catch (err) {
      if (isMissingCommand(err)) throw new WeftError(ErrorCodes.CONFIG, 'the network config sets EnableNFTables, but this node has no nft command (install the nftables package)', { cause: err });
      throw err;
    }
    if (nft.#rules.randomFully) {
      nft.#probe = await nft.#probeFullyRandom();
      if (nft.#probe === 'refused') nft.#rules = { ...nft.#rules, randomFully: false };
    }
    return nft;
  }

  /** What the dry run of `masquerade fully-random` found at start. */
  get fullyRandomProbe(): FullyRandomProbe {
    return this.#probe;
  }

  async #probeFullyRandom(): Promise<FullyRandomProbe> {
    try {
      await this.#exec('nft', ['-c', '-f', '-'], nftMasqueradeProbe(true));
      return 'accepted';
    } catch (withFullyRandom) {
      try {
        await this.#exec('nft', ['-c', '-f', '-'], nftMasqueradeProbe(false));
      } catch (err) {
        this.#log.error({ err }, `the dry run of a masquerade rule failed, with and without fully-random; keeping fully-random: ${errorMessage(err)}`);
        return 'probe-failed';
      }
      this.#log.warn({ err: withFullyRandom }, 'the kernel refuses masquerade fully-random; masquerading without it');
      return 'refused';
    }
  }

  /**
   * flannel's iptables chains go, with the jumps to them, in both families; unlike flanneld, which
   * looks for FLANNEL-FWD in the nat table and leaves it in place. No other chain is touched.
   */
  async removeOtherMode(): Promise<void> {
    await removeFlannelChains(this.#exec, this.#log);
  }

  async apply(families: readonly FamilyTraffic[]): Promise<void> {
    await this.#owner.install(flannelTables(families, this.#rules));
    this.#log.info({ families: families.map((f) => f.family) }, 'nftables rules installed');
  }

  run(signal: AbortSignal): Promise<void> {
    return resyncLoop(() => this.check(), this.#resyncMs, signal, (err) => this.#log.error({ err }, 'nftables resync failed'));
  }

  /** One resync pass: true when something had changed and was put back. */
  async check(): Promise<boolean> {
    if (!(await this.#owner.check())) return false;
    publish('rules.repair', { mode: 'nftables' });
    return true;
  }
}

/** Deletes flannel's nftables tables where they exist (the iptables mode's clean-up of the other). */
export async function removeFlannelTables(exec: Exec, log: Logger): Promise<void> {
  await new NftOwner({ exec, log }).remove(flannelTableNames.map((t) => ({ family: t.nftFamily, name: t.name })));
}

/** flannel's nftables tables that exist, as `<family> <name>`. */
export async function presentFlannelTables(exec: Exec): Promise<string[]> {
  const listing = JSON.parse(await exec('nft', ['-j', 'list', 'tables'])) as { nftables?: Array<{ table?: { family: string; name: string } }> };
  const present = (listing.nftables ?? []).flatMap((i) => (i.table ? [`${i.table.family} ${i.table.name}`] : []));
  return flannelTableNames.map((t) => `${t.nftFamily} ${t.name}`).filter((t) => present.includes(t));
}

/**
 * flannel's iptables chains go, with the jumps to them, in both families (the nftables mode's
 * clean-up of the other, and `weft cleanup`); unlike flanneld, which looks for FLANNEL-FWD in the
 * nat table and leaves it in place. No other chain is touched. Both iptables variants are looked
 * at where the host has them (iptables-variant.ts): chains an agent left in the legacy tables are
 * invisible to iptables-nft, and the other way round.
 */
export async function removeFlannelChains(exec: Exec, log: Logger): Promise<string[]> {
  const removed: string[] = [];
  let variants = 0;
  for (const variant of ['legacy', 'nft'] as const) {
    const done = await removeChainsWith(exec, log, variant);
    if (done === undefined) continue;
    variants++;
    removed.push(...done);
  }
  if (variants === 0) removed.push(...((await removeChainsWith(exec, log, undefined)) ?? []));
  return removed;
}

/** removeFlannelChains with one variant's commands; undefined when the host has none of them. */
async function removeChainsWith(exec: Exec, log: Logger, variant: IptablesVariant | undefined): Promise<string[] | undefined> {
  const removed: string[] = [];
  for (const family of [4, 6] as const) {
    for (const [table, chain, parent] of [['nat', masqChain, 'POSTROUTING'], ['filter', forwardChain, 'FORWARD']] as const) {
      let save: string;
      try {
        // A variant's save lists every table it has, without -t: `iptables-legacy-save -t nat`
        // would create the legacy nat table on a host that never used it.
        save = await exec(iptablesCommand(family, '-save', variant), variant ? [] : ['-t', table]);
      } catch (err) {
        if (isMissingCommand(err)) return family === 4 ? undefined : removed; // no such iptables on this node
        throw err;
      }
      if (!readChain(save, { chain, parent }).chainExists) continue;
      const cmd = iptablesCommand(family, '', variant);
      for (const line of save.split('\n')) {
        if (line.startsWith(`-A ${parent} `) && line.endsWith(`-j ${chain}`)) await exec(cmd, ['-w', '-t', table, '-D', parent, ...splitArgs(line.slice(`-A ${parent} `.length))]);
      }
      await exec(cmd, ['-w', '-t', table, '-F', chain]);
      await exec(cmd, ['-w', '-t', table, '-X', chain]);
      log.info({ family, table, chain, variant: variant ?? 'as installed' }, 'removed the iptables chain of flannel\'s iptables mode');
      removed.push(`${chain} (IPv${family} ${table})`);
    }
  }
  return removed;
}
