/**
 * Handing memory back after a burst. V8 keeps a grown heap (and glibc its freed pages) resident
 * long after the garbage is gone; a long-lived agent that just programmed thousands of peers
 * should not sit on that. bin/weft passes --expose-gc, which installs V8's gc() extension.
 *
 * The code start-up ran goes too, as each of its steps ends and after the burst: weft's `resident`
 * addon (native/resident) drops the process's mappings of executable file pages, which the kernel
 * maps back from the page cache on their next use (docs/benchmarks.md: 13 MB of the node binary's
 * text in kube mode, and 10 MB off the start-up's peak).
 */
import { loadNativeAddon } from './native-addon.js';

type ResidentAddon = { releaseCode(): number; trimMalloc(): boolean };
let resident: ResidentAddon | null | undefined;

/** The addon, or null where it was not built (then code stays mapped, as before). */
function residentAddon(): ResidentAddon | null {
  if (resident === undefined) {
    try {
      resident = loadNativeAddon<ResidentAddon>('resident', 'resident') ?? null;
    } catch {
      resident = null; // releasing memory is never worth failing over
    }
  }
  return resident;
}

interface GcOptions {
  type: 'major' | 'minor';
  execution: 'sync' | 'async';
  /** "last-resort" is V8's collection under memory pressure: compacts, shrinks the young generation, releases pages. */
  flavor: 'regular' | 'last-resort';
}

let lastRelease = -Infinity;

/**
 * Collects as V8 does under memory pressure, when the runtime exposes gc(); with `code`, also
 * unmaps the executable pages (releaseCode); then hands the C allocator's free pages back
 * (malloc_trim: glibc's free() gives back only the top of its heap).
 */
export function releaseMemory(options: { code?: boolean } = {}): void {
  lastRelease = performance.now();
  (globalThis as { gc?: (options: GcOptions) => void }).gc?.({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  if (options.code) releaseCode();
  try {
    residentAddon()?.trimMalloc();
  } catch {
    // never worth failing over
  }
}

/** Unmaps the executable pages now (no collection): what has run so far faults back in as it runs again. */
export function releaseCode(): void {
  try {
    residentAddon()?.releaseCode();
  } catch {
    // Never worth failing over (it throws only where /proc/self/maps cannot be read).
  }
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
