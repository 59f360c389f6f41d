import { delay } from '../core/abort.js';

/**
 * How long a wait may last before the test fails: 30 s, or WEFT_TEST_WAIT_MS. A bound, not a claim
 * about speed; `make mutation` shortens it, so that a mutant that stops the code under test from
 * ever getting there fails its test in seconds rather than in half a minute.
 */
const defaultTimeoutMs = Number(process.env['WEFT_TEST_WAIT_MS']) || 30_000;

/** Polls `check` until it returns true; fails with `what` after `timeoutMs`. */
export async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = defaultTimeoutMs): Promise<void> {
  const deadline = Date.now() + Math.min(timeoutMs, defaultTimeoutMs);
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await delay(20);
  }
}
