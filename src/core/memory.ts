/**
 * Handing memory back after a burst. V8 keeps a grown heap (and glibc its freed pages) resident
 * long after the garbage is gone; a long-lived agent that just programmed thousands of peers
 * should not sit on that. bin/weft passes --expose-gc, which installs V8's gc() extension.
 */
interface GcOptions {
  type: 'major' | 'minor';
  execution: 'sync' | 'async';
  /** "last-resort" is V8's collection under memory pressure: compacts, shrinks the young generation, releases pages. */
  flavor: 'regular' | 'last-resort';
}

let lastRelease = -Infinity;

/** Collects as V8 does under memory pressure, when the runtime exposes gc(); else does nothing. */
export function releaseMemory(): void {
  lastRelease = performance.now();
  (globalThis as { gc?: (options: GcOptions) => void }).gc?.({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/**
 * releaseMemory for work that recurs (a periodic pass over the kernel, repairs of a flapping
 * link): at most once per `intervalMs`, as each collection costs a few tens of milliseconds.
 */
export function releaseMemoryAtMostEvery(intervalMs: number): void {
  if (performance.now() - lastRelease >= intervalMs) releaseMemory();
}

/** Resident and heap sizes in MB (quarter-MB steps), for log lines. */
export function memoryFigures(): { rssMb: number; heapUsedMb: number; heapTotalMb: number; externalMb: number } {
  const mem = process.memoryUsage();
  const mb = (n: number): number => Math.round(n / 2 ** 18) / 4;
  return { rssMb: mb(mem.rss), heapUsedMb: mb(mem.heapUsed), heapTotalMb: mb(mem.heapTotal), externalMb: mb(mem.external) };
}
