/**
 * flannel's rules in nftables mode (`"EnableNFTables": true`, spec §8.5): both tables written in one
 * `nft -f -` transaction, so a changed lease or config replaces the rules atomically. Better than
 * flanneld, which never looks at its tables again: every resync period the tables are read back
 * (`nft -j list table`) and compared with what was installed, and a rule or table deleted by hand
 * is put back the same way.
 */
import { publish } from '../core/events.js';
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { type Exec, execCommand, isMissingCommand } from './exec.js';
import { nftFullyRandomProbe, nftRuleset, nftShape, nftTables } from './nft-rules.js';
import { forwardChain, iptablesCommand, masqChain, readChain } from './rules.js';
import { splitArgs } from './iptables.js';
import { type FamilyTraffic, type TrafficManager, type TrafficOptions, resyncLoop } from './traffic-manager.js';

export interface NftablesOptions {
  readonly exec?: Exec;
  readonly log: Logger;
  readonly resyncMs: number;
  readonly rules: TrafficOptions;
}

/** What weft reads of an `nft -j` listing. */
interface NftItem {
  readonly metainfo?: unknown;
  readonly chain?: { readonly name: string };
  readonly rule?: { readonly chain: string };
}

export class Nftables implements TrafficManager {
  readonly mode = 'nftables';
  readonly #exec: Exec;
  readonly #log: Logger;
  readonly #resyncMs: number;
  #rules: TrafficOptions;
  #families: readonly FamilyTraffic[] = [];
  /** Both tables as `nft -j` listed them right after the last install, handles left out. */
  #installed = '';

  private constructor(options: NftablesOptions) {
    this.#exec = options.exec ?? execCommand;
    this.#log = options.log;
    this.#resyncMs = options.resyncMs;
    this.#rules = options.rules;
  }

  /**
   * Checks that `nft` is there (WEFT_ERR_CONFIG saying what to install when it is not) and whether
   * the kernel takes `fully-random`; flannel drops it when a dry run refuses it.
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
      try {
        await nft.#exec('nft', ['-c', '-f', '-'], nftFullyRandomProbe);
      } catch {
        nft.#log.warn({}, 'the kernel refuses masquerade fully-random; masquerading without it');
        nft.#rules = { ...nft.#rules, randomFully: false };
      }
    }
    return nft;
  }

  /**
   * flannel's iptables chains go, with the jumps to them, in both families; unlike flanneld, which
   * looks for FLANNEL-FWD in the nat table and leaves it in place. No other chain is touched.
   */
  async removeOtherMode(): Promise<void> {
    for (const family of [4, 6] as const) {
      for (const [table, chain, parent] of [['nat', masqChain, 'POSTROUTING'], ['filter', forwardChain, 'FORWARD']] as const) {
        let save: string;
        try {
          save = await this.#exec(iptablesCommand(family, '-save'), ['-t', table]);
        } catch (err) {
          if (isMissingCommand(err)) return; // no iptables on this node: nothing of flannel's to remove
          throw err;
        }
        const state = readChain(save, { table, chain, parent, family, jump: '', rules: [] });
        if (!state.chainExists) continue;
        const cmd = iptablesCommand(family, '');
        for (const line of save.split('\n')) {
          if (line.startsWith(`-A ${parent} `) && line.endsWith(`-j ${chain}`)) await this.#exec(cmd, ['-w', '-t', table, '-D', parent, ...splitArgs(line.slice(`-A ${parent} `.length))]);
        }
        await this.#exec(cmd, ['-w', '-t', table, '-F', chain]);
        await this.#exec(cmd, ['-w', '-t', table, '-X', chain]);
        this.#log.info({ family, table, chain }, 'removed the iptables chain of flannel\'s iptables mode');
      }
    }
  }

  async apply(families: readonly FamilyTraffic[]): Promise<void> {
    this.#families = families;
    await this.#install();
  }

  run(signal: AbortSignal): Promise<void> {
    return resyncLoop(() => this.check(), this.#resyncMs, signal, (err) => this.#log.error({ err }, 'nftables resync failed'));
  }

  /** One resync pass: true when something had changed and was put back. */
  async check(): Promise<boolean> {
    if ((await this.#list()).text === this.#installed) return false;
    this.#log.warn({}, 'nftables rules changed behind our back; re-applying');
    await this.#install();
    publish('rules.repair', { mode: 'nftables' });
    return true;
  }

  async #install(): Promise<void> {
    await this.#exec('nft', ['-f', '-'], nftRuleset(this.#families, this.#rules));
    const now = await this.#list();
    // The listing is a second command: someone may change the tables in between. Only a listing
    // with the shape just written becomes the reference; otherwise the next check writes again.
    this.#installed = now.shape === nftShape(this.#families, this.#rules) ? now.text : '';
    this.#log.info({ families: this.#families.map((f) => f.family) }, 'nftables rules installed');
  }

  /**
   * Both tables in nft's JSON, without the handles (which change on every install) and metadata,
   * and their shape: the chains of each table and how many rules each holds.
   */
  async #list(): Promise<{ text: string; shape: string }> {
    const texts: string[] = [];
    const shapes: string[] = [];
    for (const t of nftTables) {
      let listing: string;
      try {
        listing = await this.#exec('nft', ['-j', 'list', 'table', t.nftFamily, t.name]);
      } catch {
        texts.push(`${t.name}: missing`);
        shapes.push(`${t.name}: missing`);
        continue;
      }
      const items = ((JSON.parse(listing) as { nftables?: NftItem[] }).nftables ?? []).filter((i) => !('metainfo' in i));
      texts.push(JSON.stringify(items, (k, v: unknown) => (k === 'handle' ? undefined : v)));
      const chains = items.flatMap((i) => (i.chain ? [i.chain.name] : []));
      shapes.push(`${t.name}:${chains.map((c) => `${c}=${items.filter((i) => i.rule?.chain === c).length}`).join(',')}`);
    }
    return { text: texts.join('\n'), shape: shapes.join(' ') };
  }
}
