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

/**
 * Runs the plugin with `command` and `stdin`; rejects with the delegate's own CNI error (code,
 * msg, details) when it fails, or a flannel-style one when it printed none.
 */
export async function execDelegate(path: string, command: string, stdin: string, env: NodeJS.ProcessEnv): Promise<DelegateResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(path, [], { env: { ...env, CNI_COMMAND: command }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', (err) => reject(new CniError(CniCodes.FLANNEL, `failed to delegate ${command.toLowerCase()}: ${err.message}`)));
    child.once('exit', (code) => {
      if (code === 0) {
        resolve({ stdout, stderr });
        return;
      }
      try {
        const e = JSON.parse(stdout) as { code?: unknown; msg?: unknown; details?: unknown };
        if (typeof e.code === 'number' && typeof e.msg === 'string') {
          reject(new CniError(e.code, e.msg, typeof e.details === 'string' ? e.details : undefined));
          return;
        }
      } catch {
        // no JSON error from the delegate
      }
      reject(new CniError(CniCodes.FLANNEL, stderr.trim() ? `netplugin failed: ${JSON.stringify(stderr.trim())}` : `netplugin failed with no error message: exit status ${code}`));
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
  });
}
