/**
 * A file written whole or not at all: under a hidden name next to it (created exclusively, never
 * through a symlink planted there), synced, then renamed over the target. A reader (the CNI
 * plugin, the next agent) sees the old content or the new, never half of it. Used for subnet.env,
 * the CNI plugin's per-attachment state and the udp backend's saved table (here, beside
 * subnet.env, its first user: backends and the CNI plugin may import subnet/ but not each other).
 */
import { constants } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

let counter = 0;

export async function writeFileAtomically(path: string, text: string, mode: number): Promise<void> {
  // Unique per process and call; O_EXCL refuses a name left by a crashed run or planted.
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${Date.now()}.${++counter}`);
  try {
    const fh = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
    try {
      await fh.writeFile(text);
      await fh.chmod(mode);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}
