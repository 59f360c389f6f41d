/**
 * flanneld reads its network config once; a config changed in the registry (or a net-conf.json
 * changed in its ConfigMap) under running agents is silently ignored until each restarts. weft
 * does the same, but says so: once in the log when the registry's config departs from the one
 * the agent runs with, and in `weft status` for as long as it does.
 */
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';

export class ConfigDrift {
  readonly #log: Logger;
  readonly #clock: Clock;
  #since: number | undefined;

  constructor(log: Logger, clock: Clock) {
    this.#log = log;
    this.#clock = clock;
  }

  /** Since when the registry's config differs from the one in use (ms since the epoch), if it does. */
  get since(): number | undefined {
    return this.#since;
  }

  /** The registry's config now (undefined: gone), against the text the agent started with (undefined: not read yet). */
  observe(current: string | undefined, inUse: string | undefined): void {
    if (inUse === undefined) return;
    if (current !== undefined && current.trim() === inUse.trim()) {
      if (this.#since !== undefined) this.#log.info({}, 'the network config in the registry is again the one this agent runs with');
      this.#since = undefined;
      return;
    }
    if (this.#since !== undefined) return;
    this.#since = this.#clock.now();
    this.#log.warn({}, `the network config in the registry ${current === undefined ? 'was removed' : 'changed'}; this agent keeps the one it started with until it restarts, as flanneld does (restart the agents to apply it)`);
  }
}
