/**
 * The agent's end of the host's static CNI plugin (native/cni-plugin): a unix socket beside the
 * subnet file, root's only. Each connection is one CNI command: the plugin sends its environment
 * and stdin, the agent runs the plugin's logic (cni/flannel-cni.ts) with the plugin as its host
 * (cni/remote-host.ts), one step at a time, and ends with what the plugin prints and its exit
 * code. One JSON document per line, both ways. What the plugin sends is checked before use.
 */
import { type Socket, createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { errorMessage } from '../core/errors.js';
import { listenPrivately } from '../core/private-socket.js';
import { publish } from '../core/events.js';
import type { Logger } from '../core/log.js';
import type { Clock } from '../core/clock.js';
import { HostError } from './cni-host.js';
import { runCni } from './flannel-cni.js';
import { type HostChannel, type HostStep, remoteHost } from './remote-host.js';

export const cniSocketName = 'weft-cni.sock';

/** The commands a metric label may name (anything else is `other`: the environment is the plugin's). */
const knownCommands = new Set(['ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION']);

/** The CNI error code in what runCni printed for a failure. */
function errorCode(stdout: string): string {
  try {
    const code = (JSON.parse(stdout) as { code?: unknown }).code;
    return Number.isInteger(code) ? String(code) : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** A request holds stdin (4 MiB at most) and the environment; an answer a delegate's output (4 MiB), escaped. */
const maxLine = 32 * 2 ** 20;
/** How long a plugin may take to send its request once connected. */
const requestMs = 10_000;
/** More plugins at once than a node starts pods: the rest are told to try again. */
const maxSessions = 256;
const maxEnvEntries = 4096;

export interface CniRequest {
  readonly env: Readonly<Record<string, string>>;
  readonly stdin: string;
}

/** Checks the plugin's first line; the reason when it is not a request. */
export function checkCniRequest(raw: unknown): CniRequest | { error: string } {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { error: 'not an object' };
  const r = raw as Record<string, unknown>;
  if (r['weft-cni'] !== 1) return { error: 'not a weft-cni request of version 1' };
  if (typeof r['stdin'] !== 'string') return { error: 'stdin is not a string' };
  const env = r['env'];
  if (typeof env !== 'object' || env === null || Array.isArray(env)) return { error: 'env is not an object' };
  const entries = Object.entries(env);
  if (entries.length > maxEnvEntries) return { error: `more than ${maxEnvEntries} environment variables` };
  if (!entries.every(([, v]) => typeof v === 'string')) return { error: 'an environment variable is not a string' };
  return { env: Object.fromEntries(entries) as Record<string, string>, stdin: r['stdin'] };
}

/** JSON lines over one connection: the next line, or a rejection when the peer went away or was silent too long. */
class LineChannel implements HostChannel {
  readonly #socket: Socket;
  #buffered = '';
  /** Where the first line ends in #buffered, -1 while it has not: each chunk is searched once, not the whole buffer again. */
  #lineEnd = -1;
  #waiting: ((line: string | Error) => void) | undefined;
  #ended: Error | undefined;

  constructor(socket: Socket) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      if (this.#lineEnd < 0) {
        const at = chunk.indexOf('\n');
        if (at >= 0) this.#lineEnd = this.#buffered.length + at;
      }
      this.#buffered += chunk;
      if (this.#lineEnd < 0 && this.#buffered.length > maxLine) this.#end(new HostError('EMSGSIZE', `a line over ${maxLine} bytes from the CNI plugin`));
      this.#deliver();
    });
    socket.on('close', () => this.#end(new HostError('EPIPE', 'the CNI plugin went away')));
    socket.on('error', (err) => this.#end(new HostError('EPIPE', `the CNI plugin's connection failed: ${err.message}`)));
  }

  #end(err: Error): void {
    this.#ended ??= err;
    this.#deliver();
    this.#socket.destroy();
  }

  #deliver(): void {
    if (!this.#waiting) return;
    const at = this.#lineEnd;
    if (at < 0 && !this.#ended) return;
    const give = this.#waiting;
    this.#waiting = undefined;
    if (at < 0) return give(this.#ended!);
    const line = this.#buffered.slice(0, at);
    this.#buffered = this.#buffered.slice(at + 1);
    this.#lineEnd = this.#buffered.indexOf('\n');
    give(line);
  }

  next(timeoutMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.#end(new HostError('ETIMEDOUT', `the CNI plugin did not answer within ${timeoutMs} ms`)), timeoutMs);
      this.#waiting = (line) => {
        clearTimeout(timer);
        if (line instanceof Error) return reject(line);
        try {
          resolve(JSON.parse(line));
        } catch {
          reject(new HostError('EPROTO', 'the CNI plugin sent a line that is not JSON'));
        }
      };
      this.#deliver();
    });
  }

  send(message: Readonly<Record<string, unknown>>): void {
    if (!this.#ended) this.#socket.write(JSON.stringify(message) + '\n');
  }

  async call(step: HostStep, timeoutMs: number): Promise<Readonly<Record<string, unknown>>> {
    if (this.#ended) throw this.#ended;
    this.send(step);
    const reply = await this.next(timeoutMs);
    if (typeof reply !== 'object' || reply === null || Array.isArray(reply)) throw new HostError('EPROTO', `the CNI plugin's answer to ${step.op} is not an object`);
    return reply as Record<string, unknown>;
  }

  close(): void {
    this.#socket.end();
  }
}

export class CniSocketServer {
  readonly #path: string;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #sockets = new Set<Socket>();
  readonly #listening = Promise.withResolvers<void>();

  constructor(options: { subnetFile: string; log: Logger; clock: Clock }) {
    this.#path = join(dirname(options.subnetFile), cniSocketName);
    this.#log = options.log;
    this.#clock = options.clock;
  }

  get path(): string {
    return this.#path;
  }

  /** Settles once the socket is listened on (never, if run() is stopped before it could be). */
  get listening(): Promise<void> {
    return this.#listening.promise;
  }

  /** Serves until `signal` aborts; a socket that cannot be listened on is tried again, with backoff. */
  async run(signal: AbortSignal): Promise<void> {
    let delayMs = 1000;
    let failed = '';
    while (!signal.aborted) {
      try {
        await this.#serve(signal);
        return;
      } catch (err) {
        const problem = errorMessage(err);
        if (problem !== failed) this.#log.error({ err, socket: this.#path }, `cannot listen for the CNI plugin; pods cannot be added on this node until it can (tried again with backoff): ${problem}`);
        failed = problem;
        await this.#clock.sleep(delayMs, signal).catch(() => undefined);
        delayMs = Math.min(delayMs * 2, 30_000);
      }
    }
  }

  async #serve(signal: AbortSignal): Promise<void> {
    // A socket the last agent left is replaced.
    const server = createServer((socket) => this.#session(socket, signal));
    server.maxConnections = maxSessions;
    await listenPrivately(server, this.#path);
    this.#listening.resolve();
    server.on('error', (err) => this.#log.warn({ err, socket: this.#path }, 'the CNI plugin socket failed'));
    this.#log.info({ socket: this.#path }, 'serving the CNI plugin');
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #session(socket: Socket, signal: AbortSignal): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
    const channel = new LineChannel(socket);
    void (async () => {
      let command = '';
      try {
        const request = checkCniRequest(await channel.next(requestMs));
        if ('error' in request) throw new HostError('EPROTO', `a CNI plugin request refused: ${request.error}`);
        command = request.env['CNI_COMMAND'] ?? '';
        const started = performance.now();
        let stdout = '';
        let stderr = '';
        const code = await runCni(request.env, {
          stdin: () => Promise.resolve(request.stdin),
          stdout: (t) => (stdout += t),
          stderr: (t) => (stderr += t),
          host: remoteHost(channel),
        });
        publish('cni.command', { command: knownCommands.has(command) ? command : 'other', result: code === 0 ? 'ok' : errorCode(stdout), seconds: (performance.now() - started) / 1000 });
        if (!signal.aborted) channel.send({ op: 'done', code, stdout, stderr });
        channel.close();
      } catch (err) {
        // The plugin went away, or sent what is not the protocol: it reports its own failure.
        this.#log.warn({ err, command }, `a CNI plugin session ended early: ${errorMessage(err)}`);
        socket.destroy();
      }
    })();
  }
}
