/**
 * The agent's end of the CNI plugin's policy hook (cni/policy-hook.ts): a unix socket beside the
 * subnet file, root's only, where the plugin says which pod of this node got which addresses; the
 * answer comes once the pod's NetworkPolicy is in the kernel. The mode file beside it tells the
 * plugin whether to wait at all. Requests are untrusted: size-capped, checked field by field.
 */
import { rename, rm, writeFile } from 'node:fs/promises';
import { type Socket, createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { errorMessage } from '../core/errors.js';
import { listenPrivately } from '../core/private-socket.js';
import type { Logger } from '../core/log.js';
import { type IpAddr, tryParseIp } from '../ip/ip.js';
import { type PolicyHookReply, type PolicyHookRequest, policyModeName, policySocketName } from '../cni/policy-hook.js';

const maxRequest = 4096;
const idleMs = 30_000;
/** Kubernetes object names: DNS subdomains (pods), DNS labels (namespaces). */
const namePattern = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;

export interface PolicyHookHandler {
  add(pod: { namespace: string; name: string; containerId: string; ips: readonly IpAddr[] }, signal: AbortSignal): Promise<void>;
  del(pod: { namespace: string; name: string; containerId: string }): void;
}

/** Checks a request; the reason when it is not one. */
export function checkRequest(raw: unknown): { request: PolicyHookRequest; ips: IpAddr[] } | { error: string } {
  if (typeof raw !== 'object' || raw === null) return { error: 'not an object' };
  const r = raw as Record<string, unknown>;
  if (r['op'] !== 'add' && r['op'] !== 'del') return { error: 'op is neither add nor del' };
  for (const k of ['namespace', 'name'] as const) if (typeof r[k] !== 'string' || !namePattern.test(r[k])) return { error: `${k} is no Kubernetes name` };
  if (typeof r['containerId'] !== 'string' || !/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,255}$/.test(r['containerId'])) return { error: 'containerId is no container ID' };
  const list = Array.isArray(r['ips']) ? (r['ips'] as unknown[]) : [];
  if (list.length > 2) return { error: 'more than two addresses' };
  const ips: IpAddr[] = [];
  for (const v of list) {
    const ip = typeof v === 'string' ? tryParseIp(v) : undefined;
    if (!ip) return { error: `${JSON.stringify(v)} is no address` };
    ips.push(ip);
  }
  if (r['op'] === 'add' && ips.length === 0) return { error: 'an add without addresses' };
  return { request: { op: r['op'], namespace: r['namespace'] as string, name: r['name'] as string, containerId: r['containerId'], ips: list as string[] }, ips };
}

export class PolicyHookServer {
  readonly #dir: string;
  readonly #mode: string;
  readonly #handler: PolicyHookHandler;
  readonly #log: Logger;
  readonly #sockets = new Set<Socket>();

  constructor(options: { subnetFile: string; mode: string; handler: PolicyHookHandler; log: Logger }) {
    this.#dir = dirname(options.subnetFile);
    this.#mode = options.mode;
    this.#handler = options.handler;
    this.#log = options.log;
  }

  get path(): string {
    return join(this.#dir, policySocketName);
  }

  /**
   * Serves until `signal` aborts. The mode file stays when the agent stops: under `enforce`, a pod
   * created while no agent answers must wait for one (the plugin says "try again later").
   */
  async run(signal: AbortSignal): Promise<void> {
    // A socket the last agent left is replaced.
    const server = createServer((socket) => this.#serve(socket, signal));
    await listenPrivately(server, this.path);
    server.on('error', (err) => this.#log.warn({ err, socket: this.path }, 'the NetworkPolicy hook socket failed'));
    const modeFile = join(this.#dir, policyModeName);
    await writeFile(`${modeFile}.tmp`, `${this.#mode}\n`, { mode: 0o644 });
    await rename(`${modeFile}.tmp`, modeFile);
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #serve(socket: Socket, signal: AbortSignal): void {
    this.#sockets.add(socket);
    socket.setTimeout(idleMs, () => socket.destroy());
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.setEncoding('utf8');
    let buffered = '';
    const answer = (reply: PolicyHookReply): void => {
      socket.end(JSON.stringify(reply) + '\n');
    };
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      const end = buffered.indexOf('\n');
      if (end < 0) {
        if (buffered.length > maxRequest) answer({ ok: false, error: `a request over ${maxRequest} bytes` });
        return;
      }
      socket.removeAllListeners('data');
      let raw: unknown;
      try {
        raw = JSON.parse(buffered.slice(0, end));
      } catch {
        return answer({ ok: false, error: 'a request that is not JSON' });
      }
      const checked = checkRequest(raw);
      if ('error' in checked) {
        this.#log.warn({ reason: checked.error }, 'a NetworkPolicy hook request refused');
        return answer({ ok: false, error: checked.error });
      }
      const { request, ips } = checked;
      if (request.op === 'del') {
        this.#handler.del(request);
        return answer({ ok: true });
      }
      this.#handler.add({ namespace: request.namespace, name: request.name, containerId: request.containerId, ips }, signal).then(
        () => answer({ ok: true }),
        (err: unknown) => {
          this.#log.warn({ err, pod: `${request.namespace}/${request.name}` }, `could not isolate a new pod before it starts: ${errorMessage(err)}`);
          answer({ ok: false, error: errorMessage(err) });
        },
      );
    });
  }
}

/** With policy off: the mode file and socket an earlier agent left go, so the plugin waits for nothing. */
export async function removePolicyHook(subnetFile: string): Promise<void> {
  await rm(join(dirname(subnetFile), policyModeName), { force: true });
  await rm(join(dirname(subnetFile), policySocketName), { force: true });
}
