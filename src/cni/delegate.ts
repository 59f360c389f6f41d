/** Runs a delegate plugin (bridge, host-local, ...) found on CNI_PATH, as the CNI library does. */
import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { join } from 'node:path';
import { CniCodes, CniError } from './cni-error.js';

export async function findPlugin(type: string, cniPath: string): Promise<string> {
  const dirs = cniPath.split(':').filter((d) => d !== '');
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(type)) throw new CniError(CniCodes.INVALID_CONFIG, `invalid delegate plugin type ${JSON.stringify(type)}`);
  for (const dir of dirs) {
    const path = join(dir, type);
    try {
      await access(path, constants.X_OK);
      return path;
    } catch {
      // next directory
    }
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
  /** Aborts when the plugin itself is told to stop: the delegate goes with it. */
  readonly signal?: AbortSignal;
}

/** More output than any CNI result needs: a delegate printing more is broken. */
const maxDelegateOutput = 4 * 2 ** 20;

/**
 * Runs the plugin with `command` and `stdin`; rejects with the delegate's own CNI error (code,
 * msg, details) when it fails, or a flannel-style one when it printed none. The delegate runs in
 * a process group of its own, so that on the deadline, or when the plugin is stopped, it is
 * killed with whatever it started rather than left behind. ADD's output must be a JSON object.
 */
export async function execDelegate(path: string, command: string, stdin: string, env: NodeJS.ProcessEnv, limits: DelegateLimits): Promise<DelegateResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(path, [], { env: { ...env, CNI_COMMAND: command }, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    let failure: CniError | undefined;
    let settled = false;
    const fail = (err: CniError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      reject(err);
    };
    const killGroup = (why: CniError): void => {
      failure ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      // Something that left the group may still hold the pipes: do not wait for them to close.
      child.stdout.destroy();
      child.stderr.destroy();
      fail(failure);
    };
    const timer = setTimeout(() => killGroup(new CniError(CniCodes.FLANNEL, `delegate ${command.toLowerCase()} did not finish within ${limits.timeoutMs} ms; it was killed with its process group`)), limits.timeoutMs);
    const onAbort = (): void => killGroup(new CniError(CniCodes.FLANNEL, `the plugin was stopped during delegate ${command.toLowerCase()}`));
    limits.signal?.addEventListener('abort', onAbort, { once: true });
    const collect = (append: (d: string) => void) => (d: Buffer) => {
      if (stdout.length + stderr.length + d.length > maxDelegateOutput) killGroup(new CniError(CniCodes.FLANNEL, `delegate ${command.toLowerCase()} printed more than ${maxDelegateOutput} bytes`));
      else append(d.toString());
    };
    child.stdout.on('data', collect((d) => (stdout += d)));
    child.stderr.on('data', collect((d) => (stderr += d)));
    child.once('error', (err) => fail(new CniError(CniCodes.FLANNEL, `failed to delegate ${command.toLowerCase()}: ${err.message}`)));
    child.once('close', (code) => {
      if (failure) return fail(failure);
      if (code === 0) {
        if (command === 'ADD' && !isJsonObjectText(stdout)) return fail(new CniError(CniCodes.DECODE_FAILURE, `delegate add succeeded but printed no CNI result: ${JSON.stringify(stdout.slice(0, 200))}`));
        settled = true;
        clearTimeout(timer);
        limits.signal?.removeEventListener('abort', onAbort);
        resolve({ stdout, stderr });
        return;
      }
      try {
        const e = JSON.parse(stdout) as { code?: unknown; msg?: unknown; details?: unknown };
        if (typeof e.code === 'number' && typeof e.msg === 'string') return fail(new CniError(e.code, e.msg, typeof e.details === 'string' ? e.details : undefined));
      } catch {
        // no JSON error from the delegate
      }
      fail(new CniError(CniCodes.FLANNEL, stderr.trim() ? `netplugin failed: ${JSON.stringify(stderr.trim())}` : `netplugin failed with no error message: exit status ${code}`));
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
  });
}

function isJsonObjectText(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}
