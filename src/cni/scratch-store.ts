/**
 * Per-attachment state: the exact bytes given to the delegate on ADD, so that DEL works after
 * subnet.env is gone (flannel-compat §10.8).
 *
 * flannel's plugin keys the file by container ID alone (`<dataDir>/<containerID>`), so two
 * networks, or two interfaces, of one container that share a dataDir overwrite each other's
 * state, and a DEL or GC of one runs the other's delegate. weft keys it by network, container ID
 * and interface: `<dataDir>/_weft/<network>/<containerID>/<ifname>` (`_` cannot begin a container
 * ID, so no flannel file is ever named so). It also writes flannel's file, so that a node rolled
 * back to flannel's plugin can still DEL its pods, and reads flannel's file, for pods added before
 * weft, when it names this network. Every file is written to a temporary name and renamed: never
 * in place, and never through a symlink planted at its name.
 */
import { dirname, join } from 'node:path';
import { isJsonObject } from '../json/go-json.js';
import { CniCodes, CniError } from './cni-error.js';
import type { CniHost, HostError } from './cni-host.js';

/** One attachment of a container to a network, as the runtime names it. */
export interface Attachment {
  readonly dataDir: string;
  readonly network: string;
  readonly containerId: string;
  readonly ifname: string;
}

/** An attachment with saved state; `ifname` is unknown for a file of flannel's plugin. */
export interface SavedAttachment {
  readonly containerId: string;
  readonly ifname?: string;
}

/** Larger saved state is not ours: a delegate config is a few hundred bytes. */
const maxStateBytes = 1 << 20;

const keyedPath = (a: Pick<Attachment, 'dataDir' | 'network'>, ...rest: string[]): string => join(a.dataDir, '_weft', a.network, ...rest);
const flannelPath = (a: Pick<Attachment, 'dataDir' | 'containerId'>): string => join(a.dataDir, a.containerId);

export async function saveState(host: CniHost, a: Attachment, bytes: string): Promise<void> {
  try {
    await host.mkdirp(a.dataDir, 0o700);
    await checkDataDir(host, a.dataDir);
    await writeAtomically(host, keyedPath(a, a.containerId, a.ifname), bytes);
    await writeAtomically(host, flannelPath(a), bytes);
  } catch (err) {
    throw new CniError(CniCodes.IO_FAILURE, `cannot save delegate config in ${a.dataDir}: ${(err as Error).message}`);
  }
}

/** The saved bytes of this attachment, or of flannel's file when it names this network; undefined when there are none. */
export async function loadState(host: CniHost, a: Attachment): Promise<string | undefined> {
  if (!(await checkDataDir(host, a.dataDir))) return undefined;
  return (await readState(host, keyedPath(a, a.containerId, a.ifname))) ?? (await flannelState(host, a));
}

export async function removeState(host: CniHost, a: Attachment): Promise<void> {
  await host.remove(keyedPath(a, a.containerId, a.ifname));
  // Directories left empty go too, so that a node without pods has an empty dataDir, as before.
  for (const dir of [keyedPath(a, a.containerId), keyedPath(a), join(a.dataDir, '_weft')]) {
    if (!(await host.rmdir(dir))) break;
  }
  // flannel's file is this attachment's when it names this network (or holds what it would).
  if ((await flannelState(host, a)) !== undefined) await host.remove(flannelPath(a));
}

/** The attachments of `network` with saved state: weft's, and flannel's files that name it. */
export async function listState(host: CniHost, dataDir: string, network: string): Promise<SavedAttachment[]> {
  const out: SavedAttachment[] = [];
  const seen = new Set<string>();
  for (const containerId of await entries(host, keyedPath({ dataDir, network }))) {
    for (const ifname of await entries(host, keyedPath({ dataDir, network }, containerId))) out.push({ containerId, ifname });
    seen.add(containerId);
  }
  for (const name of await entries(host, dataDir)) {
    if (seen.has(name) || !/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(name)) continue;
    if ((await flannelState(host, { dataDir, network, containerId: name })) !== undefined) out.push({ containerId: name });
  }
  return out;
}

/** flannel's file of this container, when it is a file that names this network. */
async function flannelState(host: CniHost, a: Pick<Attachment, 'dataDir' | 'network' | 'containerId'>): Promise<string | undefined> {
  const bytes = await readState(host, flannelPath(a));
  if (bytes === undefined) return undefined;
  try {
    const saved: unknown = JSON.parse(bytes);
    // A file whose name cannot be read is flannel's DEL's to handle, as before: it is this network's.
    return !isJsonObject(saved) || typeof saved['name'] !== 'string' || saved['name'] === a.network ? bytes : undefined;
  } catch {
    return bytes;
  }
}

/**
 * The state directory must be a real directory that only its owner may write: DEL runs the
 * plugin a saved file names with the saved config, so whoever can plant a file there chooses
 * what runs as root. False when there is none (nothing was ever saved).
 */
async function checkDataDir(host: CniHost, dir: string): Promise<boolean> {
  const info = await host.lstat(dir).catch((err: unknown) => {
    throw new CniError(CniCodes.IO_FAILURE, `cannot read the state directory ${dir}: ${(err as Error).message}`);
  });
  if (!info) return false;
  if (info.kind !== 'dir') throw new CniError(CniCodes.IO_FAILURE, `the state directory ${dir} is not a directory (a symlink?): refusing to keep or read container state there`);
  if ((info.mode & 0o022) !== 0) {
    throw new CniError(CniCodes.IO_FAILURE, `the state directory ${dir} is writable by others (mode ${(info.mode & 0o777).toString(8)}): refusing to keep or read container state there; chmod go-w it`);
  }
  return true;
}

async function readState(host: CniHost, path: string): Promise<string | undefined> {
  try {
    const info = await host.lstat(path);
    if (info?.kind !== 'file') return undefined;
    return await host.readFile(path, maxStateBytes);
  } catch (err) {
    if ((err as HostError).code === 'ENOENT') return undefined;
    throw new CniError(CniCodes.IO_FAILURE, `cannot read saved delegate config ${path}: ${(err as Error).message}`);
  }
}

async function entries(host: CniHost, dir: string): Promise<string[]> {
  return host.readdir(dir).catch((err: unknown) => {
    throw new CniError(CniCodes.IO_FAILURE, `cannot list ${dir}: ${(err as Error).message}`);
  });
}

async function writeAtomically(host: CniHost, path: string, bytes: string): Promise<void> {
  await host.mkdirp(dirname(path), 0o700);
  await host.writeAtomically(path, bytes, 0o600);
}
