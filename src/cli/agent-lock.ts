/**
 * One agent per subnet file: two agents on one node would fight over the same devices, rules and
 * file (and, given one --public-ip, the same lease). The lock is `<subnet-file>.lock` holding the
 * holder's pid; a lock whose holder is gone (killed, the node rebooted) is taken over, and a
 * SIGHUP re-execution keeps its pid, so it is its own holder.
 */
import { mkdir, open, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ErrorCodes, WeftError } from '../core/errors.js';

/** Takes the lock or throws WEFT_ERR_CONFIG naming the running holder; resolves to its release. */
export async function takeAgentLock(subnetFile: string): Promise<() => Promise<void>> {
  const path = `${subnetFile}.lock`;
  await mkdir(dirname(path), { recursive: true });
  const mine = String(process.pid);
  try {
    const fh = await open(path, 'wx', 0o644);
    await fh.writeFile(mine);
    await fh.close();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim());
    if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && (await isAgent(holder))) {
      throw new WeftError(ErrorCodes.CONFIG, `another agent (pid ${holder}) runs with --subnet-file ${subnetFile}; stop it first (its lock: ${path})`);
    }
    await writeFile(path, mine);
  }
  return async () => {
    if ((await readFile(path, 'utf8').catch(() => '')).trim() === mine) await rm(path, { force: true });
  };
}

/** A live process that is a weft or flanneld agent (not an unrelated process that reused the pid). */
async function isAgent(pid: number): Promise<boolean> {
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
  if (args.some((a) => /(^|\/)flanneld$/.test(a))) return true;
  const weft = args.findIndex((a) => a.endsWith('/cli/entry.cjs'));
  return weft >= 0 && !['status', 'doctor', 'leases', 'config', 'cleanup', 'version', 'help'].includes(args[weft + 1] ?? '');
}
