/**
 * The CNI host as the static plugin (native/cni-plugin) reaches it for the agent: each call is one
 * step sent over the plugin's connection and done by the plugin on the host, with the host's
 * answer back. Same meaning as local-host.ts, call for call: the plugin answers with the system
 * call's result and errno, and what Node's calls make of that (a missing file is no stat, a
 * missing directory lists empty) is decided here. Answers are checked before they are believed.
 */
import { type CniHost, type ExecOutcome, type ExecRequest, HostError, type HostStat } from './cni-host.js';

export type HostStep = Readonly<Record<string, unknown>> & { readonly op: string };

export interface HostChannel {
  /** One step to the plugin and its answer; rejects (a HostError) when the plugin went away or took longer than `timeoutMs`. */
  call(step: HostStep, timeoutMs: number): Promise<Readonly<Record<string, unknown>>>;
}

/** A file step is a system call or two: a plugin that takes longer is stuck. */
const fileStepMs = 30_000;
/** The plugin enforces the delegate's deadline itself; this is for a plugin that does not come back. */
const execSlackMs = 30_000;

function protocolError(step: string, what: string): HostError {
  return new HostError('EPROTO', `the CNI plugin's answer to ${step} ${what}`);
}

export function remoteHost(channel: HostChannel): CniHost {
  const call = async (step: HostStep, timeoutMs = fileStepMs): Promise<Readonly<Record<string, unknown>>> => {
    const reply = await channel.call(step, timeoutMs);
    if (reply['ok'] === true) return reply;
    const code = typeof reply['code'] === 'string' && /^E[A-Z0-9]+$/.test(reply['code']) ? reply['code'] : 'EIO';
    throw new HostError(code, `${step.op} ${String(step['path'])}: ${typeof reply['message'] === 'string' ? reply['message'] : code}`);
  };
  const missing = (err: unknown, ...codes: string[]): boolean => err instanceof HostError && codes.includes(err.code);
  const field = <T>(reply: Readonly<Record<string, unknown>>, step: string, name: string, check: (v: unknown) => v is T): T => {
    const v = reply[name];
    if (!check(v)) throw protocolError(step, `has no valid ${name}`);
    return v;
  };
  const isString = (v: unknown): v is string => typeof v === 'string';
  const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
  const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
  return {
    async lstat(path: string): Promise<HostStat | undefined> {
      try {
        const r = await call({ op: 'lstat', path });
        const kind = field(r, 'lstat', 'kind', (v): v is HostStat['kind'] => v === 'file' || v === 'dir' || v === 'other');
        return { kind, mode: field(r, 'lstat', 'mode', isCount), size: field(r, 'lstat', 'size', isCount) };
      } catch (err) {
        if (missing(err, 'ENOENT')) return undefined;
        throw err;
      }
    },
    async readFile(path: string, maxBytes: number): Promise<string> {
      const text = field(await call({ op: 'read', path, max: maxBytes }), 'read', 'text', isString);
      if (Buffer.byteLength(text) > maxBytes) throw new HostError('EFBIG', `more than ${maxBytes} bytes`);
      return text;
    },
    async mkdirp(path: string, mode: number): Promise<void> {
      await call({ op: 'mkdirp', path, mode });
    },
    async writeAtomically(path: string, text: string, mode: number): Promise<void> {
      await call({ op: 'write', path, text, mode });
    },
    async remove(path: string): Promise<void> {
      await call({ op: 'remove', path }).catch((err: unknown) => {
        if (!missing(err, 'ENOENT')) throw err;
      });
    },
    rmdir: async (path: string) => field(await call({ op: 'rmdir', path }), 'rmdir', 'removed', isBoolean),
    async readdir(path: string): Promise<string[]> {
      try {
        const names = field(await call({ op: 'readdir', path }), 'readdir', 'names', (v): v is unknown[] => Array.isArray(v));
        if (!names.every((n) => typeof n === 'string' && n !== '' && !n.includes('/'))) throw protocolError('readdir', 'has a name that is none');
        return names as string[];
      } catch (err) {
        if (missing(err, 'ENOENT', 'ENOTDIR')) return [];
        throw err;
      }
    },
    executable: async (path: string) => field(await call({ op: 'executable', path }), 'executable', 'yes', isBoolean),
    async exec(request: ExecRequest): Promise<ExecOutcome> {
      const { path, env, stdin, timeoutMs, maxOutput } = request;
      const r = await call({ op: 'exec', path, env, stdin, timeoutMs, maxOutput }, timeoutMs + execSlackMs);
      const status = r['status'];
      switch (status) {
        case 'exited': {
          const stdout = field(r, 'exec', 'stdout', isString);
          const stderr = field(r, 'exec', 'stderr', isString);
          if (Buffer.byteLength(stdout) + Buffer.byteLength(stderr) > maxOutput) return { status: 'overflow' };
          return { status, code: field(r, 'exec', 'code', isCount), stdout, stderr };
        }
        case 'timeout':
        case 'overflow':
        case 'stopped':
          return { status };
        case 'unstartable':
          return { status, message: field(r, 'exec', 'message', isString) };
        default:
          throw protocolError('exec', 'has no valid status');
      }
    },
  };
}
