/**
 * The UAPI socket of a device of weft's own data path, where `wg` and `wireguard-go` look for it
 * (`/var/run/wireguard/<name>.sock`): `wg show flannel-wg` reads the device, and `wg set` changes
 * it as it would change the kernel's. A change made there is outside the leases: the reconciler
 * hears of it (onOutsideChange) and puts the device back in line at once, as it does a route
 * deleted by hand. Root only (mode 0600), requests capped, idle connections closed.
 */
import { unlink } from 'node:fs/promises';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { join } from 'node:path';
import type { Logger } from '../../core/log.js';
import { listenPrivately } from '../../core/private-socket.js';

/** wireguard-go's and wg's directory. */
export const defaultSocketDir = '/var/run/wireguard';
const maxRequest = 1 << 20;
const idleMs = 10_000;

export class UapiServer {
  readonly #path: string;
  readonly #handle: (request: string) => string;
  readonly #changed: () => void;
  readonly #log: Logger;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();

  /** `handle` answers one request; `changed` is called after each `set=1`. */
  constructor(dir: string, device: string, handle: (request: string) => string, changed: () => void, log: Logger) {
    this.#path = join(dir, `${device}.sock`);
    this.#handle = handle;
    this.#changed = changed;
    this.#log = log;
  }

  get path(): string {
    return this.#path;
  }

  /** Listens, unless another live process serves the path (then logs it and does without). */
  async start(): Promise<void> {
    if (await answers(this.#path)) {
      this.#log.warn({ socket: this.#path }, 'another process serves this WireGuard device\'s UAPI socket; `wg` will not see weft\'s device');
      return;
    }
    const server = createServer((socket) => this.#serve(socket));
    await listenPrivately(server, this.#path);
    server.on('error', (err) => this.#log.warn({ err, socket: this.#path }, 'the WireGuard UAPI socket failed'));
    this.#server = server;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await unlink(this.#path).catch(() => undefined);
  }

  #serve(socket: Socket): void {
    this.#sockets.add(socket);
    socket.setTimeout(idleMs, () => socket.destroy());
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buffered = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      if (buffered.length > maxRequest) {
        socket.end('errno=-22\n\n');
        return;
      }
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const request = buffered.slice(0, end + 2);
        buffered = buffered.slice(end + 2);
        const answer = this.#handle(request);
        socket.write(answer);
        if (request.startsWith('set=1\n')) this.#changed();
      }
    });
  }
}

/** Whether something accepts connections on the socket path. */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.setTimeout(1000, () => {
      s.destroy();
      resolve(true);
    });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
