/**
 * A Clock that moves only when a test says so. `advance` fires the sleeps that fall due in time
 * order and lets the code each one wakes run (to its next await on something else) before the
 * next fires, so a loop that sleeps again sees the time of the sleep that woke it.
 */
import { abortReason } from '../core/abort.js';
import type { Clock } from '../core/clock.js';

interface Sleeper {
  readonly at: number;
  readonly seq: number;
  readonly wake: () => void;
}

/** Lets every callback queued so far, and what they queue in turn, run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #sleepers = new Set<Sleeper>();

  constructor(start = Date.UTC(2026, 10, 23)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#sleepers.delete(sleeper);
        reject(abortReason(signal));
      };
      const sleeper: Sleeper = {
        at: this.#now + Math.max(0, ms),
        seq: this.#seq++,
        wake: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.#sleepers.add(sleeper);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** How many sleeps are waiting. */
  get sleeping(): number {
    return this.#sleepers.size;
  }

  /** Lets what is running reach its next sleep, then moves time to when the earliest sleep falls due. */
  async wakeNext(): Promise<void> {
    await settle();
    const at = this.nextWake;
    if (at === undefined) throw new RangeError('nothing is sleeping');
    await this.advance(at - this.#now);
  }

  /** When the earliest sleep falls due, if any. */
  get nextWake(): number | undefined {
    let at: number | undefined;
    for (const s of this.#sleepers) if (at === undefined || s.at < at) at = s.at;
    return at;
  }

  /** Moves time forward by `ms`, waking each sleep that falls due, earliest first. */
  async advance(ms: number): Promise<void> {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`a clock moves forward by a finite time, not ${ms}`);
    const target = this.#now + ms;
    await settle();
    for (;;) {
      const due = [...this.#sleepers].filter((s) => s.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.#sleepers.delete(due);
      this.#now = Math.max(this.#now, due.at);
      due.wake();
      await settle();
    }
    this.#now = target;
    await settle();
  }
}
