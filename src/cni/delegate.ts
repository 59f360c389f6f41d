/** Runs a delegate plugin (bridge, host-local, ...) found on CNI_PATH, as the CNI library does. */
import { join } from 'node:path';
import { CniCodes, CniError } from './cni-error.js';
import type { CniHost } from './cni-host.js';

export async function findPlugin(host: CniHost, type: string, cniPath: string): Promise<string> {
  const dirs = cniPath.split(':').filter((d) => d !== '');
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(type)) throw new CniError(CniCodes.INVALID_CONFIG, `invalid delegate plugin type ${JSON.stringify(type)}`);
  for (const dir of dirs) {
    const path = join(dir, type);
    if (await host.executable(path)) return path;
  }
  throw new CniError(CniCodes.INVALID_CONFIG, `failed to find plugin "${type}" in path [${dirs.join(' ')}]`);
}

export interface DelegateResult {
  readonly stdout: string;
  readonly stderr: string;
}

export interface DelegateLimits {
  /** How long the delegate may run before it and its children are killed. */
  readonly timeoutMs: number;
}

/** More output than any CNI result needs: a delegate printing more is broken. */
export const maxDelegateOutput = 4 * 2 ** 20;

/**
 * Runs the plugin with `command` and `stdin`; rejects with the delegate's own CNI error (code,
 * msg, details) when it fails, or a flannel-style one when it printed none. The delegate runs in
 * a process group of its own, so that on the deadline, or when the plugin is stopped, it is
 * killed with whatever it started rather than left behind. ADD's output must be a JSON object.
 */
export async function execDelegate(host: CniHost, path: string, command: string, stdin: string, env: Readonly<Record<string, string | undefined>>, limits: DelegateLimits): Promise<DelegateResult> {
  const defined = Object.fromEntries(Object.entries({ ...env, CNI_COMMAND: command }).filter((e): e is [string, string] => e[1] !== undefined));
  const outcome = await host.exec({ path, env: defined, stdin, timeoutMs: limits.timeoutMs, maxOutput: maxDelegateOutput });
  const what = `delegate ${command.toLowerCase()}`;
  switch (outcome.status) {
    case 'timeout':
      throw new CniError(CniCodes.FLANNEL, `${what} did not finish within ${limits.timeoutMs} ms; it was killed with its process group`);
    case 'overflow':
      throw new CniError(CniCodes.FLANNEL, `${what} printed more than ${maxDelegateOutput} bytes`);
    case 'stopped':
      throw new CniError(CniCodes.FLANNEL, `the plugin was stopped during ${what}`);
    case 'unstartable':
      throw new CniError(CniCodes.FLANNEL, `failed to delegate ${command.toLowerCase()}: ${outcome.message}`);
    case 'exited':
      break;
  }
  const { code, stdout, stderr } = outcome;
  if (code === 0) {
    if (command === 'ADD' && !isJsonObjectText(stdout)) throw new CniError(CniCodes.DECODE_FAILURE, `delegate add succeeded but printed no CNI result: ${JSON.stringify(stdout.slice(0, 200))}`);
    return { stdout, stderr };
  }
  try {
    const e = JSON.parse(stdout) as { code?: unknown; msg?: unknown; details?: unknown };
    if (typeof e.code === 'number' && typeof e.msg === 'string') throw new CniError(e.code, e.msg, typeof e.details === 'string' ? e.details : undefined);
  } catch (err) {
    if (err instanceof CniError) throw err;
    // no JSON error from the delegate
  }
  throw new CniError(CniCodes.FLANNEL, stderr.trim() ? `netplugin failed: ${JSON.stringify(stderr.trim())}` : `netplugin failed with no error message: exit status ${code}`);
}

function isJsonObjectText(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}
