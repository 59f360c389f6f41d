/**
 * The extension backend's commands, run as flannel runs them (pkg/backend/extension): the
 * command line from the network config split at white space, `$VAR` and `${VAR}` in each word
 * expanded from the agent's environment and the variables given (Go's os.Expand), run without a
 * shell, with those variables added to its environment and `stdin` and a newline on its standard
 * input; the answer is its standard output and error together, trimmed. Lease data (a peer's
 * subnet, address, backend data) reaches a command only as an environment variable or its input:
 * never as shell text. Unlike flannel, a command that runs past its deadline is killed.
 */
import { spawn } from 'node:child_process';
import { ErrorCodes, WeftError } from '../../core/errors.js';

export interface CommandResult {
  readonly output: string;
  readonly ok: boolean;
  /** Why not ok: the exit status, the signal, or the error starting it. */
  readonly failure?: string;
}

const defaultDeadlineMs = 60_000;
/** What of a command's output is kept (it becomes BackendData, or a log line). */
const maxOutput = 64 * 1024;

/** Go's os.Expand over one word: `${NAME}`, `$NAME`, `$` and one special character ($*, $1...). */
export function expandWord(word: string, lookup: (name: string) => string): string {
  let out = '';
  for (let j = 0; j < word.length; j++) {
    if (word[j] !== '$' || j + 1 >= word.length) {
      out += word[j];
      continue;
    }
    const [name, width] = shellName(word.slice(j + 1));
    if (name !== '') out += lookup(name);
    else if (width === 0) out += '$'; // "$" before no name stays
    // else: bad syntax ("${" or "${}"), eaten
    j += width;
  }
  return out;
}

const special = (c: string | undefined): boolean => c !== undefined && /^[*#$@!?\-0-9]$/.test(c);

/** Go's getShellName: the name after a "$", and how many characters it takes. */
function shellName(s: string): [string, number] {
  if (s[0] === '{') {
    if (s.length > 2 && special(s[1]) && s[2] === '}') return [s[1]!, 3];
    const close = s.indexOf('}', 1);
    if (close === 1) return ['', 2];
    if (close < 0) return ['', 1];
    return [s.slice(1, close), close + 1];
  }
  if (special(s[0])) return [s[0]!, 1];
  const name = /^[A-Za-z0-9_]*/.exec(s)![0];
  return [name, name.length];
}

/** The words of a configured command line, expanded; WEFT_ERR_CONFIG when it is empty. */
export function commandWords(line: string, env: Readonly<Record<string, string | undefined>>): string[] {
  const words = line.split(/\s+/).filter(Boolean);
  if (words.length === 0) throw new WeftError(ErrorCodes.CONFIG, 'an empty extension command');
  return words.map((w) => expandWord(w, (name) => env[name] ?? ''));
}

/** Runs `line` with `vars` added to the environment and `stdin` on its input; killed after `deadlineMs`. */
export function runCommand(line: string, vars: Readonly<Record<string, string>>, stdin: string, baseEnv: NodeJS.ProcessEnv = process.env, deadlineMs = defaultDeadlineMs): Promise<CommandResult> {
  const env = { ...baseEnv, ...vars };
  const [file, ...args] = commandWords(line, env);
  return new Promise((resolve) => {
    // Its own process group, so that the deadline ends what it started too (a child left holding
    // its output would keep it open).
    const child = spawn(file!, args, { env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let output = '';
    const collect = (d: Buffer): void => {
      if (output.length < maxOutput) output += d.toString().slice(0, maxOutput - output.length);
    };
    const timer = setTimeout(() => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, deadlineMs);
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.stdin.on('error', () => undefined); // a command that never reads its input
    child.stdin.end(`${stdin}\n`);
    child.once('error', (err) => {
      clearTimeout(timer);
      resolve({ output: output.trim(), ok: false, failure: err.message });
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ output: output.trim(), ok: true });
      else resolve({ output: output.trim(), ok: false, failure: signal ? `killed by ${signal}${signal === 'SIGKILL' ? ` (a deadline of ${deadlineMs / 1000} s)` : ''}` : `exit status ${code}` });
    });
  });
}
