/**
 * The CNI_* variables a command needs, checked before anything is done with them (flannel-compat
 * §10.1): a container ID names the file of its saved state and an interface name goes to the
 * delegate, so neither may carry a path or anything the kernel would refuse. Pure.
 */
import { CniCodes, CniError } from './cni-error.js';

type Env = Readonly<Record<string, string | undefined>>;

/** As libcni: a letter or digit, then letters, digits, `_`, `.` and `-` (no `/`, so no `../`). */
const containerIdPattern = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** Throws CniError INVALID_ENV naming what is missing or malformed among `names`. */
export function checkEnv(env: Env, names: readonly string[]): void {
  const missing = names.filter((n) => !env[n]);
  if (missing.length > 0) throw new CniError(CniCodes.INVALID_ENV, `required env variables [${missing.join(',')}] missing`);
  const id = env['CNI_CONTAINERID'];
  if (id !== undefined && names.includes('CNI_CONTAINERID') && !containerIdPattern.test(id)) {
    throw new CniError(CniCodes.INVALID_ENV, `invalid characters in containerID ${JSON.stringify(id)}`);
  }
  const ifname = env['CNI_IFNAME'];
  if (ifname !== undefined && names.includes('CNI_IFNAME') && !validInterfaceName(ifname)) {
    throw new CniError(CniCodes.INVALID_ENV, `invalid interface name ${JSON.stringify(ifname)}`);
  }
}

/** What the kernel takes as a link name: at most 15 bytes, not `.` or `..`, no `/`, `:` or space. */
export function validInterfaceName(name: string): boolean {
  return name.length > 0 && Buffer.byteLength(name) <= 15 && name !== '.' && name !== '..' && !/[/:\s]/.test(name);
}
