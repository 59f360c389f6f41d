import { delay } from '../core/abort.js';

/** Polls `check` until it returns true; fails with `what` after `timeoutMs` (a bound, not a claim about speed). */
export async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await delay(20);
  }
}
