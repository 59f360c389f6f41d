/**
 * Installs flannel's masquerade and forward rules with iptables-restore, as every Kubernetes
 * network agent does, and keeps them: every `resyncMs` one iptables-save per table is compared
 * with what was installed (flanneld spawns `iptables -C` per rule), and the set is re-applied
 * if anything differs. Replacing the chain's contents also drops the rules of an old subnet.
 */
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { delay } from '../core/abort.js';
import type { Logger } from '../core/log.js';
import { type RuleSet, iptablesCommand, readChain, restorePayload } from './rules.js';

export type Exec = (cmd: string, args: readonly string[], input?: string) => Promise<string>;

const execFileAsync = promisify(execFile);

/** Runs a command, feeding `input` on stdin; rejects with its stderr on a non-zero exit. */
export const execCommand: Exec = async (cmd, args, input) => {
  if (input === undefined) return (await execFileAsync(cmd, args, { maxBuffer: 32 * 2 ** 20 })).stdout;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} failed (exit ${code}): ${err.trim()}`))));
    child.stdin.end(input);
  });
};

export interface IptablesOptions {
  readonly exec?: Exec;
  readonly log: Logger;
  readonly resyncMs: number;
}

export class Iptables {
  readonly #exec: Exec;
  readonly #log: Logger;
  readonly #resyncMs: number;
  #sets: readonly RuleSet[] = [];
  /** What iptables-save showed for each chain right after it was installed. */
  readonly #installed = new Map<string, string>();

  constructor(options: IptablesOptions) {
    this.#exec = options.exec ?? execCommand;
    this.#log = options.log;
    this.#resyncMs = options.resyncMs;
  }

  /** Installs these rule sets now (replacing earlier ones of the same chains). */
  async apply(sets: readonly RuleSet[]): Promise<void> {
    this.#sets = sets;
    for (const set of sets) await this.#install(set);
  }

  /** Re-checks every `resyncMs` until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await delay(this.#resyncMs, signal);
      } catch {
        return;
      }
      for (const set of this.#sets) {
        try {
          const state = readChain(await this.#save(set), set);
          if (!state.chainExists || state.jumps !== 1 || state.rules.join('\n') !== this.#installed.get(key(set))) {
            this.#log.warn({ family: set.family, table: set.table, chain: set.chain }, 'iptables rules changed behind our back; re-applying');
            await this.#install(set);
          }
        } catch (err) {
          if (!signal.aborted) this.#log.error({ err, chain: set.chain }, 'iptables resync failed');
        }
      }
    }
  }

  async #install(set: RuleSet): Promise<void> {
    const before = readChain(await this.#save(set), set);
    // A duplicate jump (e.g. from an older agent) goes; exactly one is kept.
    for (let i = 1; i < before.jumps; i++) await this.#exec(iptablesCommand(set.family, ''), ['-w', '-t', set.table, '-D', set.parent, ...splitArgs(set.jump)]);
    await this.#exec(iptablesCommand(set.family, '-restore'), ['--noflush', '--wait'], restorePayload(set, { addJump: before.jumps === 0 }));
    const after = readChain(await this.#save(set), set);
    this.#installed.set(key(set), after.rules.join('\n'));
    this.#log.info({ family: set.family, table: set.table, chain: set.chain, rules: after.rules.length }, 'iptables rules installed');
  }

  #save(set: RuleSet): Promise<string> {
    return this.#exec(iptablesCommand(set.family, '-save'), ['-t', set.table]);
  }
}

const key = (set: RuleSet): string => `${set.family} ${set.chain}`;

/** Splits rule text into arguments, keeping quoted comments whole. */
export function splitArgs(rule: string): string[] {
  return [...rule.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}
