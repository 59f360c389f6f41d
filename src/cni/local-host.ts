/** The CNI host as the plugin's own process sees it: Node's file system calls and child processes. */
import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { constants } from 'node:os';
import { StringDecoder } from 'node:string_decoder';
import { access, lstat, mkdir, readdir, rm, rmdir } from 'node:fs/promises';
import { writeFileAtomically } from '../subnet/atomic-file.js';
import { readBoundedFile } from '../subnet/bounded-file.js';
import { type CniHost, type ExecOutcome, type ExecRequest, HostError, type HostStat } from './cni-host.js';

function hostError(err: unknown): HostError {
  const e = err as NodeJS.ErrnoException;
  return new HostError(e.code ?? 'EIO', e.message);
}

/** `signal` is the plugin's own stop (SIGTERM): a running delegate is killed with it. */
export function localHost(signal?: AbortSignal): CniHost {
  return {
    async lstat(path: string): Promise<HostStat | undefined> {
      try {
        const info = await lstat(path);
        return { kind: info.isFile() ? 'file' : info.isDirectory() ? 'dir' : 'other', mode: info.mode, size: info.size };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw hostError(err);
      }
    },
    async readFile(path: string, maxBytes: number): Promise<string> {
      return readBoundedFile(path, maxBytes).catch((err: unknown) => {
        throw hostError(err);
      });
    },
    async mkdirp(path: string, mode: number): Promise<void> {
      await mkdir(path, { recursive: true, mode }).catch((err: unknown) => {
        throw hostError(err);
      });
    },
    async writeAtomically(path: string, text: string, mode: number): Promise<void> {
      await writeFileAtomically(path, text, mode).catch((err: unknown) => {
        throw hostError(err);
      });
    },
    async remove(path: string): Promise<void> {
      await rm(path, { force: true }).catch((err: unknown) => {
        throw hostError(err);
      });
    },
    rmdir: (path: string) => rmdir(path).then(() => true, () => false),
    async readdir(path: string): Promise<string[]> {
      try {
        return await readdir(path);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return [];
        throw hostError(err);
      }
    },
    executable: (path: string) => access(path, fsConstants.X_OK).then(() => true, () => false),
    exec: (request: ExecRequest) => execLocal(request, signal),
  };
}

function execLocal(request: ExecRequest, signal: AbortSignal | undefined): Promise<ExecOutcome> {
  return new Promise((resolve) => {
    // A group of its own, so that on the deadline or a stop it goes with whatever it started.
    const child = spawn(request.path, [], { env: { ...request.env }, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    let settled = false;
    const settle = (outcome: ExecOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(outcome);
    };
    const killGroup = (status: 'timeout' | 'overflow' | 'stopped'): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      // Something that left the group may still hold the pipes: do not wait for them to close.
      child.stdout.destroy();
      child.stderr.destroy();
      settle({ status });
    };
    const timer = setTimeout(() => killGroup('timeout'), request.timeoutMs);
    const onAbort = (): void => killGroup('stopped');
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    // Bytes are counted, and a character split between two reads is decoded whole.
    let bytes = 0;
    const outText = new StringDecoder('utf8');
    const errText = new StringDecoder('utf8');
    const collect = (decoder: StringDecoder, append: (d: string) => void) => (d: Buffer) => {
      bytes += d.length;
      if (bytes > request.maxOutput) killGroup('overflow');
      else append(decoder.write(d));
    };
    child.stdout.on('data', collect(outText, (d) => (stdout += d)));
    child.stderr.on('data', collect(errText, (d) => (stderr += d)));
    child.once('error', (err) => settle({ status: 'unstartable', message: err.message }));
    // As a shell reports it: a delegate killed by a signal exits 128 + its number.
    child.once('close', (code, sig) => settle({ status: 'exited', code: code ?? 128 + (sig ? constants.signals[sig] : 0), stdout: stdout + outText.end(), stderr: stderr + errText.end() }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(request.stdin);
  });
}
