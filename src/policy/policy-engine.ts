/**
 * The policy engine: keeps the Pods, Namespaces and NetworkPolicies it is fed (from informers over
 * the agent's one connection to the API server), compiles them for this node's pods whenever they
 * change (debounced: a burst of changes is one compilation), installs the table when what it would
 * write differs from what is installed, and checks it against drift. Nothing here knows the API
 * server or nft: the daemon hands it change streams and the table's owner.
 */
import { Backoff } from '../core/backoff.js';
import { publish } from '../core/events.js';
import { type Clock, systemClock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import { type IpAddr, formatIp } from '../ip/ip.js';
import { type OwnedTable, replaceTables } from '../traffic/nft-table.js';
import { type PodProgram, compile } from './compiler.js';
import type { World } from './model.js';
import { counterOf, podChain, policyTable, renderPolicyTable } from './nft-render.js';
import { DeniedCounts } from './policy-counters.js';
import { type NamespaceRecord, type PodRecord, type PolicyRecord, type RefusedPolicy, isRefused } from './records.js';

export type PolicyMode = 'enforce' | 'dry-run';

/** A batch of changes to one collection, as an informer delivers them (the first: everything). */
export type Changes<R> = AsyncIterable<ReadonlyArray<{ readonly type: 'put' | 'delete'; readonly record: R }>>;

/** What keeps the table in the kernel (an NftOwner of its own). */
export interface TableKeeper {
  /**
   * Makes the table this: `updated` where only what differs was changed (unchanged chains kept
   * their counters), `replaced` where it was written whole (every counter starts over).
   */
  install(tables: readonly OwnedTable[]): Promise<'updated' | 'replaced'>;
  /** True when the kernel's table had drifted and was written again. */
  check(): Promise<boolean>;
  /** The items the last full listing found (a check's before its repair, or before a table was written whole). */
  listed(table: typeof policyTable): readonly unknown[];

}

export interface PolicyEngineOptions {
  readonly node: string;
  readonly mode: PolicyMode;
  readonly pods: Changes<PodRecord>;
  readonly namespaces: Changes<NamespaceRecord>;
  readonly policies: Changes<PolicyRecord | RefusedPolicy>;
  readonly tables: TableKeeper;
  readonly log: Logger;
  readonly clock?: Clock;
  /** Quiet time after a change before compiling. Default 50 ms. */
  readonly debounceMs?: number;
  /** Drift checks, and reads of the counters. Default 10 s. */
  readonly checkMs?: number;
}

export interface PolicyStatus {
  readonly mode: PolicyMode;
  readonly policies: number;
  readonly refused: ReadonlyArray<{ readonly policy: string; readonly reason: string }>;
  /** This node's pods that a policy selects, with those policies. */
  readonly pods: ReadonlyArray<{ readonly pod: string; readonly ingress: boolean; readonly egress: boolean; readonly policies: readonly string[] }>;
  /** When the table last went in (ms since the epoch); absent before the first. */
  readonly installedAt?: number;
  /** Every change the engine has been told of is in the kernel's table (what a caller waits on, not a sleep). */
  readonly programmed: boolean;
  /** When the counters were last read from the kernel (ms since the epoch): what `denied` holds up to. */
  readonly countedAt?: number;
  /** Packets rejected (enforcing) or that would have been (a dry run), per pod and direction, since the agent started. */
  readonly denied: ReadonlyArray<{ readonly pod: string; readonly direction: 'ingress' | 'egress'; readonly packets: number }>;
  /** A dry run's pairs behind those packets, the busiest first: pods by name, anything else by address. */
  readonly deniedPairs: ReadonlyArray<{ readonly direction: 'ingress' | 'egress'; readonly from: string; readonly to: string; readonly packets: number }>;
}

type Owner = { readonly pod: string; readonly direction: 'ingress' | 'egress' };

const podKey = (p: { namespace: string; name: string }): string => `${p.namespace}/${p.name}`;

export class PolicyEngine {
  readonly #o: PolicyEngineOptions;
  readonly #clock: Clock;
  readonly #pods = new Map<string, PodRecord>();
  readonly #namespaces = new Map<string, NamespaceRecord>();
  readonly #policies = new Map<string, PolicyRecord>();
  readonly #refused = new Map<string, string>();
  #programs: readonly PodProgram[] = [];
  #installedText = '';
  #installedAt: number | undefined;
  readonly #counts = new DeniedCounts();
  #table: OwnedTable | undefined;
  /** The installed table's pod chains, and whose. */
  #owners = new Map<string, Owner>();
  #countedAt: number | undefined;
  /** Chains deleted whose counters stay until a check has read them. */
  readonly #retired = new Map<string, Owner>();
  /** Addresses the CNI plugin gave pods of this node that the API does not list yet, by pod. */
  readonly #cniIps = new Map<string, readonly IpAddr[]>();
  #kick: () => void = () => undefined;
  /** Changes seen, and how many of them the installed table holds; admitLocalPod waits on it. */
  #generation = 0;
  #installedGeneration = -1;
  #waiters: Array<{ readonly generation: number; readonly resolve: () => void }> = [];

  constructor(options: PolicyEngineOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
  }

  status(): PolicyStatus {
    const byIp = new Map<string, string>();
    for (const p of this.#pods.values()) if (!p.hostNetwork) for (const ip of p.ips) byIp.set(formatIp(ip), podKey(p));
    return {
      denied: this.#counts.denied(),
      deniedPairs: this.#counts.pairs((ip) => byIp.get(ip) ?? ip),
      programmed: this.#installedGeneration === this.#generation,
      ...(this.#countedAt !== undefined ? { countedAt: this.#countedAt } : {}),
      mode: this.#o.mode,
      policies: this.#policies.size,
      refused: [...this.#refused].map(([policy, reason]) => ({ policy, reason })),
      pods: this.#programs.map((p) => ({ pod: podKey(p.pod), ingress: p.ingress !== undefined, egress: p.egress !== undefined, policies: p.policies })),
      ...(this.#installedAt !== undefined ? { installedAt: this.#installedAt } : {}),
    };
  }

  world(nodes: ReadonlyMap<string, readonly IpAddr[]> = new Map()): World {
    // A pod the CNI plugin just gave its addresses has none in the API yet (the kubelet reports
    // them later): the plugin's are used until then.
    const pods = [...this.#pods.values()].map((p) => (p.ips.length === 0 && this.#cniIps.has(podKey(p)) ? { ...p, ips: this.#cniIps.get(podKey(p))! } : p));
    return { pods, namespaces: [...this.#namespaces.values()], policies: [...this.#policies.values()], nodes };
  }

  /**
   * A pod of this node that the CNI plugin has just given `pod.ips`, before any of its containers
   * runs: resolves once the table that isolates it (if a policy selects it) is in. `pod` is the
   * API's Pod where the informer has not brought it yet.
   */
  admitLocalPod(pod: PodRecord): Promise<void> {
    const key = podKey(pod);
    this.#cniIps.set(key, pod.ips);
    if (!this.#pods.has(key)) this.#pods.set(key, pod);
    this.#kick();
    const target = this.#generation;
    return new Promise((resolve) => {
      if (this.#installedGeneration >= target) resolve();
      else this.#waiters.push({ generation: target, resolve });
    });
  }

  /** The CNI plugin's DEL: the addresses it gave the pod are no longer the pod's. */
  forgetLocalPod(pod: { readonly namespace: string; readonly name: string }): void {
    if (this.#cniIps.delete(podKey(pod))) this.#kick();
  }

  /** Every change so far is in the installed table. */
  #settled(generation: number): void {
    this.#installedGeneration = generation;
    const ready = this.#waiters.filter((w) => w.generation <= generation);
    this.#waiters = this.#waiters.filter((w) => w.generation > generation);
    for (const w of ready) w.resolve();
  }

  /** Until `signal` aborts: follows the three streams and keeps the table. */
  async run(signal: AbortSignal): Promise<void> {
    let dirty = false;
    let wake = new AbortController();
    const kick = (): void => {
      this.#generation++;
      dirty = true;
      wake.abort();
    };
    this.#kick = kick;
    const primed = { pods: false, namespaces: false, policies: false };
    const follow = async <R>(name: keyof typeof primed, source: Changes<R>, apply: (type: 'put' | 'delete', record: R) => void): Promise<void> => {
      for await (const batch of source) {
        for (const c of batch) apply(c.type, c.record);
        primed[name] = true;
        kick();
        if (signal.aborted) return;
      }
    };
    const followers = [
      follow('pods', this.#o.pods, (type, pod) => {
        if (type === 'put') this.#pods.set(podKey(pod), pod);
        else {
          this.#pods.delete(podKey(pod));
          this.#cniIps.delete(podKey(pod));
        }
      }),
      follow('namespaces', this.#o.namespaces, (type, ns) => (type === 'put' ? this.#namespaces.set(ns.name, ns) : this.#namespaces.delete(ns.name))),
      follow('policies', this.#o.policies, (type, p) => this.#applyPolicy(type, p)),
    ].map((f) => f.catch((err: unknown) => (signal.aborted ? undefined : this.#o.log.error({ err }, 'a policy source failed'))));
    const retry = new Backoff({ initialMs: 500, maxMs: 30_000 });
    const checkMs = this.#o.checkMs ?? 10_000;
    let nextCheck = this.#clock.now() + checkMs;
    try {
      while (!signal.aborted) {
        if (!dirty) await this.#clock.sleep(Math.max(0, nextCheck - this.#clock.now()), AbortSignal.any([signal, wake.signal])).catch(() => undefined);
        wake = new AbortController();
        if (signal.aborted) return;
        const changed = dirty;
        dirty = false;
        // Nothing goes in before every collection is known: an empty program would open every pod.
        if (!(primed.pods && primed.namespaces && primed.policies)) continue;
        // A burst of changes (a deployment's pods) makes one compilation.
        if (changed) await this.#clock.sleep(this.#o.debounceMs ?? 50, signal).catch(() => undefined);
        if (signal.aborted) return;
        try {
          if (changed || this.#installedAt === undefined) await this.#install();
          if (this.#clock.now() >= nextCheck) {
            const t0 = this.#clock.now();
            const drifted = await this.#o.tables.check();
            this.#counts.observe(this.#o.tables.listed(policyTable));
            this.#countedAt = this.#clock.now();
            // A table written again after drift counts from 0: what it had counted is kept. The
            // counters of deleted chains have been read: kept, and left for the next change to delete.
            this.#counts.fold(drifted ? 'all' : new Set(this.#retired.keys()));
            if (this.#retired.size > 0) {
              this.#retired.clear();
              this.#counts.installed(this.#owners);
            }
            if (drifted) publish('policy.repair', {});
            // A check lists the whole table, which at tens of thousands of set elements takes
            // hundreds of milliseconds: it never takes more than a twentieth of the time.
            nextCheck = this.#clock.now() + Math.max(checkMs, 20 * (this.#clock.now() - t0));
          }
          retry.reset();
        } catch (err) {
          const ms = retry.next();
          this.#o.log.error({ err, retryMs: ms }, 'installing the NetworkPolicy table failed; trying again after a pause');
          this.#installedText = '';
          await this.#clock.sleep(ms, signal).catch(() => undefined);
          dirty = true;
        }
      }
    } finally {
      await Promise.allSettled(followers);
    }
  }

  #applyPolicy(type: 'put' | 'delete', p: PolicyRecord | RefusedPolicy): void {
    const key = podKey(p);
    this.#policies.delete(key);
    this.#refused.delete(key);
    if (type === 'delete') return;
    if (isRefused(p)) {
      this.#refused.set(key, p.refused);
      this.#o.log.warn({ policy: key, reason: p.refused }, 'NetworkPolicy refused: the API server would not have taken it; it is not enforced');
      return;
    }
    this.#policies.set(key, p);
  }

  async #install(): Promise<void> {
    const t0 = performance.now();
    const generation = this.#generation;
    this.#programs = compile(this.world(), this.#o.node);
    const rendered = renderPolicyTable(this.#programs, { dryRun: this.#o.mode === 'dry-run' });
    const chains = new Map<string, Owner>();
    for (const p of this.#programs) {
      if (p.ingress) chains.set(podChain(p.pod, 'in'), { pod: podKey(p.pod), direction: 'ingress' });
      if (p.egress) chains.set(podChain(p.pod, 'out'), { pod: podKey(p.pod), direction: 'egress' });
    }
    // Chains written over keep their named counters. A chain this change deletes leaves its
    // counter in the table until the next check has read it (no listing now: nft loads every set
    // to list anything), which keeps what it counted.
    for (const [chain, owner] of this.#owners) if (!chains.has(chain)) this.#retired.set(chain, owner);
    for (const chain of chains.keys()) this.#retired.delete(chain);
    const table: OwnedTable = { ...rendered, counters: [...(rendered.counters ?? []), ...[...this.#retired.keys()].map(counterOf)] };
    const text = replaceTables([table]);
    if (text === this.#installedText) {
      publish('policy.program', { seconds: (performance.now() - t0) / 1000, how: 'unchanged' });
      return this.#settled(generation);
    }
    const how = await this.#o.tables.install([table]);
    if (how === 'replaced' && this.#table) {
      // Written whole, every counter starts over: what the table had counted, as listed before.
      this.#counts.observe(this.#o.tables.listed(policyTable));
      this.#counts.fold('all');
      this.#retired.clear();
    }
    this.#owners = chains;
    this.#counts.installed(new Map([...chains, ...this.#retired]));
    this.#table = table;
    this.#installedText = text;
    this.#installedAt = this.#clock.now();
    const seconds = (performance.now() - t0) / 1000;
    publish('policy.program', { seconds, how });
    this.#o.log.info({ policies: this.#policies.size, pods: this.#programs.length, mode: this.#o.mode, how, ms: Math.round(seconds * 1000) }, 'NetworkPolicy table installed');
    this.#settled(generation);
  }
}
