/**
 * Two ways to start a rule tool, behind one shape: weft's `spawn` addon (posix_spawn, which does
 * not copy the agent's page tables: 0.8 against 6 ms of the agent's one thread a command at 50 MB
 * resident, docs/benchmarks.md), and Node's child_process where the addon was not built. The
 * child sees the same either way: stdin from the caller or /dev/null, stdout and stderr to the
 * caller (pipes from the addon, socket pairs from libuv), the process's environment, every
 * signal at its default.
 */
import type * as ChildProcess from 'node:child_process';
import type * as Net from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { constants } from 'node:os';
import { loadNativeAddon, nativeErrnoName } from '../core/native-addon.js';

/** How a child ended: its exit status, or the signal that ended it. */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: string | null;
}

export interface StartedChild {
  readonly stdin: Writable | undefined;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Settles once the child has exited and its stdout and stderr are closed; rejects when it never started. */
  readonly exited: Promise<ChildExit>;
  /** SIGKILL, and stops waiting for output a grandchild may still hold open. */
  kill(): void;
}

/** Starts a child; a StartError, thrown or from `exited`, when it could not be started. */
export type ChildStarter = (cmd: string, args: readonly string[], withStdin: boolean) => StartedChild;

/** A child that could not start: the errno name (ENOENT when the command does not exist). */
export class StartError extends Error {
  readonly errno: string;

  constructor(message: string, errno: string, cause: unknown) {
    super(message, { cause });
    this.errno = errno;
  }
}

export const libuvStarter: ChildStarter = (cmd, args, withStdin) => {
  const { spawn } = process.getBuiltinModule('node:child_process') as typeof ChildProcess;
  const child = spawn(cmd, args, { stdio: [withStdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  const exited = new Promise<ChildExit>((resolve, reject) => {
    child.once('error', (e: NodeJS.ErrnoException) => reject(new StartError(`${cmd}: ${e.message}`, e.code ?? 'EIO', e)));
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  const { stdin, stdout, stderr } = child;
  // Out of descriptors (EMFILE), Node has no streams to give; its 'error' follows.
  if (!stdout || !stderr) {
    exited.catch(() => undefined);
    throw new StartError(`${cmd}: no pipes for its output`, 'EMFILE', undefined);
  }
  const kill = (): void => {
    child.kill('SIGKILL');
    for (const stream of [stdin, stdout, stderr]) stream?.destroy();
  };
  return { stdin: stdin ?? undefined, stdout, stderr, exited, kill };
};

interface SpawnAddon {
  spawn(file: string, args: readonly string[], withStdin: boolean): [pid: number, stdin: number, stdout: number, stderr: number];
  reap(pid: number): [code: number, signal: number] | undefined;
}

const signalNames = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name]));

/** The longest wait between two looks for a child's exit once its output has closed. */
const maxReapGapMs = 50;

function nativeStarter(addon: SpawnAddon): ChildStarter {
  return (cmd, args, withStdin) => {
    let started: ReturnType<SpawnAddon['spawn']>;
    try {
      started = addon.spawn(cmd, args, withStdin);
    } catch (err) {
      throw new StartError(`${cmd}: ${(err as Error).message}`, nativeErrnoName(err), err);
    }
    const [pid, inFd, outFd, errFd] = started;
    const net = process.getBuiltinModule('node:net') as typeof Net;
    const stdout = new net.Socket({ fd: outFd, readable: true, writable: false });
    const stderr = new net.Socket({ fd: errFd, readable: true, writable: false });
    const stdin = inFd >= 0 ? new net.Socket({ fd: inFd, readable: false, writable: true }) : undefined;
    // A read that fails ends the stream ('close' follows); the exit status says what happened.
    for (const stream of [stdout, stderr]) stream.on('error', () => undefined);
    let reaped = false;
    const closed = (s: Net.Socket): Promise<void> => new Promise((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));
    // The child's exit comes with no event of its own here (libuv reaps only its own children):
    // its output closes as it exits, and waitpid(WNOHANG) is asked then, and again shortly.
    const exited = Promise.all([closed(stdout), closed(stderr)]).then(async () => {
      for (let gapMs = 1; ; gapMs = Math.min(gapMs * 2, maxReapGapMs)) {
        const status = addon.reap(pid);
        if (status) {
          reaped = true;
          return { code: status[0] >= 0 ? status[0] : null, signal: status[1] ? (signalNames.get(status[1]) ?? `signal ${status[1]}`) : null };
        }
        await new Promise((resolve) => setTimeout(resolve, gapMs));
      }
    });
    return {
      stdin,
      stdout,
      stderr,
      exited,
      kill: () => {
        // Until it is reaped the pid is this child's (a zombie keeps it), never another process's.
        if (!reaped) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone already: its exit is reaped as usual
          }
        }
        // A grandchild may hold any of the pipes; none of them keeps the caller waiting.
        for (const stream of [stdin, stdout, stderr]) stream?.destroy();
      },
    };
  };
}

let chosen: ChildStarter | undefined;

/** The addon's starter where `make setup` built it, Node's otherwise. */
export function defaultStarter(): ChildStarter {
  chosen ??= addonStarter() ?? libuvStarter;
  return chosen;
}

/** The addon's starter; undefined where it was not built or does not load (Node's way then always works). */
export function addonStarter(): ChildStarter | undefined {
  try {
    const addon = loadNativeAddon<SpawnAddon>('spawn', 'spawn');
    return addon ? nativeStarter(addon) : undefined;
  } catch {
    return undefined;
  }
}
