/** Handing memory back: the heap after a burst, and the code only start-up ran. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { collectGarbage } from '../testing/gc.js';
import { releaseCode, releaseMemory, releaseMemoryAtMostEvery } from './memory.js';

const rssFileKb = (): number => Number(/RssFile:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
const rssAnonKb = (): number => Number(/RssAnon:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);

test('releasing code unmaps executable file pages, and what runs afterwards maps back what it needs', () => {
  createHash('sha256').update('warm up some code').digest('hex');
  const before = rssFileKb();
  releaseMemory({ code: true });
  const after = rssFileKb();
  assert.ok(after < before, `file-backed resident memory went from ${before} kB to ${after} kB`);
  // Code that was unmapped runs again as if nothing happened.
  assert.equal(createHash('sha256').update('abc').digest('hex'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.deepEqual(JSON.parse(JSON.stringify({ a: [1, 2, 3] })), { a: [1, 2, 3] });
});

test('releasing code alone, as each step of start-up ends, unmaps executable file pages too', () => {
  createHash('sha256').update('warm up some code').digest('hex');
  const before = rssFileKb();
  releaseCode();
  assert.ok(rssFileKb() < before, 'file-backed resident memory went down');
  assert.equal(createHash('sha256').update('abc').digest('hex').slice(0, 8), 'ba7816bf');
});

test('a release asks V8 for the collection it makes under memory pressure; a recurring one at most once per interval', (t) => {
  const holder = globalThis as { gc?: unknown };
  const before = holder.gc;
  const asked: unknown[] = [];
  holder.gc = (options: unknown): void => void asked.push(options);
  t.after(() => {
    holder.gc = before;
  });
  releaseMemory();
  assert.deepEqual(asked, [{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
  releaseMemoryAtMostEvery(60_000);
  assert.equal(asked.length, 1, 'not again within the interval');
  releaseMemoryAtMostEvery(0);
  assert.equal(asked.length, 2, 'again once the interval has passed');
});

test('a release hands back the pages the C allocator keeps free under its live chunks (40 MB of 1 kB buffers, one in 4000 kept)', async () => {
  let made: Buffer[] | undefined = Array.from({ length: 40_000 }, () => Buffer.allocUnsafeSlow(1000).fill(1));
  const kept = made.filter((_, i) => i % 4000 === 3999);
  made = undefined;
  // The buffers' memory goes back to the allocator as V8 sweeps them, which it may finish on another thread.
  for (let i = 0; i < 3; i++) {
    collectGarbage();
    await new Promise((r) => setTimeout(r, 20));
  }
  const before = rssAnonKb();
  releaseMemory();
  const after = rssAnonKb();
  assert.ok(before - after > 20_000, `anonymous resident memory went from ${before} kB to ${after} kB`);
  assert.equal(kept.length, 10);
  assert.equal(kept[9]![999], 1, 'what is still in use stays');
});
