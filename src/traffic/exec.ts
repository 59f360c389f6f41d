/**
 * Runs the rule tools (`iptables-restore`, `nft -f -`, ...), as every Kubernetes network agent
 * does. A tool that hangs (a held xtables lock, say) is killed after a deadline rather than
 * stopping the agent's rule keeping for good.
 */
import { type ChildExit, type ChildStarter, type StartedChild, StartError, defaultStarter } from './child-start.js';
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

export interface RunnerOptions {
  /** How long a command may run before it is killed (30 s). */
  readonly deadlineMs?: number;
  /** How children are started (child-start.ts): the addon's posix_spawn where built. */
  readonly starter?: ChildStarter;
}

/** Runs a command, feeding `input` on stdin; rejects with a CommandError carrying its stderr. */
export const execCommand: Exec = commandRunner();

export function commandRunner(options: RunnerOptions = {}): Exec {
  const limitMs = options.deadlineMs ?? deadlineMs;
  return async (cmd, args, input) => {
    let child: StartedChild;
    try {
      child = (options.starter ?? defaultStarter())(cmd, args, input !== undefined);
    } catch (err) {
      throw startFailure(cmd, err);
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill();
    }, limitMs);
    // A command that exits before reading all of its input (it failed on the first line) closes
    // the pipe under the write: its exit status says what happened, not an EPIPE that would end
    // the agent as an unhandled error.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
    let exit: ChildExit;
    try {
      exit = await child.exited;
    } catch (e) {
      throw startFailure(cmd, e);
    } finally {
      clearTimeout(timer);
    }
    if (exit.code === 0 && !killed) return Buffer.concat(out).toString();
    const why = killed ? `killed by ${exit.signal ?? 'SIGKILL'} after ${limitMs} ms` : exit.signal ? `killed by ${exit.signal}` : `exit ${exit.code}`;
    throw new CommandError(`${cmd} ${args.join(' ')} failed (${why}): ${Buffer.concat(err).toString().trim()}`);
  };
}

function startFailure(cmd: string, err: unknown): CommandError {
  if (err instanceof StartError) return new CommandError(err.message, { errno: err.errno, cause: err });
  return new CommandError(`${cmd}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

/** True when the command itself does not exist on this host. */
export function isMissingCommand(err: unknown): boolean {
  return (err as { errno?: unknown } | null)?.errno === 'ENOENT';
}
