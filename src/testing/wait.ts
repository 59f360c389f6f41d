import { delay } from '../core/abort.js';

/**
 * A bound on every wait when WEFT_TEST_WAIT_MS is set: `make mutation` sets it, so that a mutant
 * that stops the code under test from ever getting there fails its test in seconds rather than in
 * half a minute. Unset, a wait lasts as long as its caller allows (30 s unless it says otherwise).
 */
const capMs = Number(process.env['WEFT_TEST_WAIT_MS']) || Number.POSITIVE_INFINITY;

/** Polls `check` until it returns true; fails with `what` after `timeoutMs` (a bound, not a claim about speed). */
export async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + Math.min(timeoutMs, capMs);
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await delay(20);
  }
}
