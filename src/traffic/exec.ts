/**
 * Runs the rule tools (`iptables-restore`, `nft -f -`, ...), as every Kubernetes network agent
 * does. A tool that hangs (a held xtables lock, say) is killed after a deadline rather than
 * stopping the agent's rule keeping for good.
 */
import { spawn } from 'node:child_process';

export type Exec = (cmd: string, args: readonly string[], input?: string) => Promise<string>;

const deadlineMs = 30_000;

/** Runs a command, feeding `input` on stdin; rejects with its stderr on a non-zero exit. */
export const execCommand: Exec = (cmd, args, input) =>
  new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} failed (${signal ? `killed by ${signal} after ${deadlineMs} ms` : `exit ${code}`}): ${err.trim()}`));
    });
    child.stdin?.end(input);
  });

/** True when the command itself does not exist on this host. */
export function isMissingCommand(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === 'ENOENT';
}
