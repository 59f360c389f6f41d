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
