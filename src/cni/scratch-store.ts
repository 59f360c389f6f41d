/**
 * Per-container state: `<dataDir>/<containerID>` holds the exact bytes given to the delegate on
 * ADD, so DEL works after subnet.env is gone (flannel-compat §10.8). Files of the Go plugin have
 * the same form and are read the same way.
 */
import { mkdir, open, readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CniCodes, CniError } from './cni-error.js';

export async function saveState(dataDir: string, containerId: string, bytes: string): Promise<void> {
  try {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    const fh = await open(join(dataDir, containerId), 'w', 0o600);
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw new CniError(CniCodes.IO_FAILURE, `cannot save delegate config in ${dataDir}: ${(err as Error).message}`);
  }
}

/** The saved bytes, or undefined when there are none. */
export async function loadState(dataDir: string, containerId: string): Promise<string | undefined> {
  try {
    return await readFile(join(dataDir, containerId), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CniError(CniCodes.IO_FAILURE, `cannot read saved delegate config ${join(dataDir, containerId)}: ${(err as Error).message}`);
  }
}

export async function removeState(dataDir: string, containerId: string): Promise<void> {
  await rm(join(dataDir, containerId), { force: true });
}

/** Container IDs with saved state. */
export async function listState(dataDir: string): Promise<string[]> {
  try {
    return (await readdir(dataDir)).filter((f) => /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(f));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new CniError(CniCodes.IO_FAILURE, `cannot list ${dataDir}: ${(err as Error).message}`);
  }
}
