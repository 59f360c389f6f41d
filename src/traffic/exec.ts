/**
 * Runs the rule tools (`iptables-restore`, `nft -f -`, ...), as every Kubernetes network agent
 * does. A tool that hangs (a held xtables lock, say) is killed after a deadline rather than
 * stopping the agent's rule keeping for good.
 */
import { spawn } from 'node:child_process';
import { ErrorCodes, WeftError } from '../core/errors.js';

export type Exec = (cmd: string, args: readonly string[], input?: string) => Promise<string>;

const deadlineMs = 30_000;

/** A tool that failed: WEFT_ERR_COMMAND; `errno` ENOENT when the tool is not installed at all. */
export class CommandError extends WeftError {
  readonly errno: string | undefined;

  constructor(message: string, options: { errno?: string; cause?: unknown } = {}) {
    super(ErrorCodes.COMMAND, message, { cause: options.cause });
    this.name = 'CommandError';
    this.errno = options.errno;
  }
}

/** Runs a command, feeding `input` on stdin; rejects with a CommandError carrying its stderr. */
export const execCommand: Exec = (cmd, args, input) =>
  new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new CommandError(`${cmd}: ${e.message}`, { ...(e.code ? { errno: e.code } : {}), cause: e }));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new CommandError(`${cmd} ${args.join(' ')} failed (${signal ? `killed by ${signal} after ${deadlineMs} ms` : `exit ${code}`}): ${err.trim()}`));
    });
    // A command that exits before reading all of its input (it failed on the first line) closes
    // the pipe under the write: its exit status says what happened, not an EPIPE that would end
    // the agent as an unhandled error.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
  });

/** True when the command itself does not exist on this host. */
export function isMissingCommand(err: unknown): boolean {
  return (err as { errno?: unknown } | null)?.errno === 'ENOENT';
}
