/**
 * Throwaway network namespaces for tests that need a real kernel. Tests using them are named
 * `*.netns.test.ts` and skip themselves unless run as root with FLANNEL_NETNS_TESTS=1 (set by
 * `make test`). Names carry the test process's pid, so parallel runs never collide and leftovers
 * of a crashed run are recognisable.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export function netnsSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root';
  if (process.env['FLANNEL_NETNS_TESTS'] !== '1') return 'set FLANNEL_NETNS_TESTS=1 (make test does)';
  return undefined;
}

let counter = 0;
/** A namespace name unique to this process: `wft<pid>-<tag><n>`, at most 15 characters... of tag. */
export function nsName(tag: string): string {
  return `wft${process.pid}-${tag}${++counter}`;
}

export async function sh(cmd: string, args: readonly string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  if (options.input === undefined) {
    const { stdout } = await run(cmd, args, { env: options.env ?? process.env, maxBuffer: 16 * 2 ** 20 });
    return stdout;
  }
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let errText = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (errText += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${errText}${out}`))));
    // A command that exits before reading its input is judged by its exit status, not by an EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input);
  });
}

/** Runs a command inside a namespace. */
export function nsExec(ns: string, cmd: string, args: readonly string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  return sh('ip', ['netns', 'exec', ns, cmd, ...args], options);
}

/** `ip -j ...` inside a namespace, parsed. */
export async function ipJson<T = Array<Record<string, unknown>>>(ns: string, args: readonly string[]): Promise<T> {
  const out = await nsExec(ns, 'ip', ['-j', ...args]);
  return JSON.parse(out.trim() === '' ? '[]' : out) as T;
}

export async function createNetns(name: string): Promise<void> {
  await sh('ip', ['netns', 'add', name]);
  await nsExec(name, 'ip', ['link', 'set', 'lo', 'up']);
}

/** Deletes a namespace; one that is already gone is fine. */
export async function deleteNetns(name: string): Promise<void> {
  await sh('ip', ['netns', 'del', name]).catch(() => undefined);
}

/** Starts a long-running process inside a namespace. */
export function spawnInNetns(ns: string, cmd: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  return spawn('ip', ['netns', 'exec', ns, cmd, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Stops a process this test started, by pid: SIGTERM, then SIGKILL if it lingers. */
export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  const code = await exited;
  clearTimeout(timer);
  return code;
}

/**
 * Removes namespaces left by an earlier test process of ours that was killed before it could
 * clean up (names carry its pid): the processes still inside them were started by that run and
 * are stopped by pid first.
 */
export async function sweepStaleNamespaces(): Promise<string[]> {
  const removed: string[] = [];
  const list = await sh('ip', ['netns', 'list']).catch(() => '');
  for (const line of list.split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const m = /^wft(\d+)-/.exec(name);
    if (!m || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue;
    const pids = (await sh('ip', ['netns', 'pids', name]).catch(() => '')).split('\n').filter(Boolean).map(Number);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await deleteNetns(name);
    removed.push(name);
  }
  return removed;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
