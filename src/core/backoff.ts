/**
 * Exponential backoff with equal jitter (each wait between half and all of its ceiling, so that
 * agents that failed together spread out, yet none retries at once), doubling from 100 ms to 5 s
 * by default as flannel's watch loop. Pure: the random source is injected so tests can pin it.
 */
export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  random?: () => number;
}

export class Backoff {
  readonly #initial: number;
  readonly #max: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(options: BackoffOptions = {}) {
    this.#initial = options.initialMs ?? 100;
    this.#max = options.maxMs ?? 5000;
    this.#random = options.random ?? Math.random;
  }

  /** The next wait: the ceiling doubles each call up to the cap; the wait is 50-100% of it (equal jitter). */
  next(): number {
    const ceiling = Math.min(this.#max, this.#initial * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return Math.round(ceiling / 2 + (ceiling / 2) * this.#random());
  }

  reset(): void {
    this.#attempt = 0;
  }
}
