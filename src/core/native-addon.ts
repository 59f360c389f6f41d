/**
 * weft's own N-API addons (native/<dir>, built by `make setup`): where they are, from dist/ in a
 * checkout and in the image (/opt/weft/dist beside /opt/weft/native), and loading them.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { getSystemErrorName } from 'node:util';

export function nativeAddonPath(dir: string, file: string): string {
  return fileURLToPath(new URL(`../../../native/${dir}/build/Release/${file}.node`, import.meta.url));
}

/** The addon, or undefined where it was not built; one that is there but fails to load throws. */
export function loadNativeAddon<T>(dir: string, file: string): T | undefined {
  try {
    return createRequire(import.meta.url)(nativeAddonPath(dir, file)) as T;
  } catch (err) {
    if ((err as { code?: unknown }).code === 'MODULE_NOT_FOUND') return undefined;
    throw err;
  }
}

/** The errno name (`ENOENT`, ...) of an Error an addon threw with a numeric `errno`; EIO without one. */
export function nativeErrnoName(err: unknown): string {
  const errno = (err as { errno?: unknown } | null)?.errno;
  if (typeof errno !== 'number') return 'EIO';
  try {
    return getSystemErrorName(-Math.abs(errno));
  } catch {
    return `errno ${errno}`;
  }
}

/**
 * The addon with each of `calls` rethrowing what it throws through `toError` (its message and errno
 * name): an addon's kernel failures become the callers' coded errors.
 */
export function wrapCalls<T extends object>(raw: T, calls: ReadonlyArray<keyof T>, toError: (message: string, errno: string, cause: unknown) => Error): T {
  const wrapped = { ...raw };
  for (const name of calls) {
    const fn = raw[name] as (...args: unknown[]) => unknown;
    (wrapped as Record<keyof T, unknown>)[name] = (...args: unknown[]): unknown => {
      try {
        return fn.apply(raw, args);
      } catch (err) {
        throw toError(err instanceof Error ? err.message : String(err), nativeErrnoName(err), err);
      }
    };
  }
  return wrapped;
}
