/**
 * A Kubernetes API server for tests, speaking the real REST and watch wire protocol for what weft
 * uses (no real API server can run on these machines):
 * - GET /api/v1/nodes (list, with metadata.resourceVersion), GET /api/v1/nodes/{name};
 * - GET /api/v1/nodes?watch=true&resourceVersion=N[&allowWatchBookmarks=true][&timeoutSeconds=S]:
 *   a chunked stream of `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":...}` lines,
 *   replaying history after N; a compacted N yields an ERROR event with a 410 Expired Status, as
 *   the real server does;
 * - PATCH /api/v1/nodes/{name}/status with strategic merge patch (conditions merge by `type`),
 *   JSON merge patch, or 415 for anything else;
 * - bearer-token authentication (401) and a least-privilege check for the agent's token: nodes
 *   get/list/watch and nodes/status patch only (403 otherwise, e.g. PATCH /api/v1/nodes/{name}).
 * Tests change nodes through the admin methods, which bump resourceVersion and notify watchers.
 */
import type * as Http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface KubeNode {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; uid?: string; resourceVersion?: string; creationTimestamp?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec: { podCIDR?: string; podCIDRs?: string[] };
  status: { conditions?: Array<Record<string, unknown>>; addresses?: Array<{ type: string; address: string }> };
}

interface WatchEvent {
  readonly rv: number;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly node: KubeNode;
}

type Watcher = (line: string) => void;

export class KubeApiServer {
  readonly #nodes = new Map<string, KubeNode>();
  readonly #history: WatchEvent[] = [];
  readonly #watchers = new Set<{ send: Watcher; end: () => void }>();
  readonly #token: string;
  #rv = 100;
  /** Oldest resourceVersion a watch may start after. */
  #compactedTo = 0;
  #server: Http.Server | undefined;
  /** Requests seen, for assertions: `METHOD path content-type`. */
  readonly requests: string[] = [];

  constructor(options: { token: string }) {
    this.#token = options.token;
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  async listen(host = '127.0.0.1', port = 0): Promise<string> {
    const http = process.getBuiltinModule('node:http') as typeof Http;
    this.#server = http.createServer((req, res) => void this.#handle(req, res));
    await new Promise<void>((resolve) => this.#server!.listen(port, host, resolve));
    const addr = this.#server.address() as AddressInfo;
    return `http://${host}:${addr.port}`;
  }

  async close(): Promise<void> {
    for (const w of this.#watchers) w.end();
    this.#watchers.clear();
    await new Promise((resolve) => this.#server?.close(resolve) ?? resolve(undefined));
    this.#server?.closeAllConnections();
  }

  // --- admin (what kubelet and kube-controller-manager would do)

  createNode(name: string, spec: KubeNode['spec'] = {}, annotations: Record<string, string> = { 'node.alpha.kubernetes.io/ttl': '0' }): KubeNode {
    const node: KubeNode = { metadata: { name, uid: `uid-${name}`, creationTimestamp: new Date().toISOString(), annotations }, spec, status: { conditions: [] } };
    return this.#commit('ADDED', node);
  }

  updateNode(name: string, change: (node: KubeNode) => void): KubeNode {
    const node = structuredClone(this.getNode(name));
    change(node);
    return this.#commit('MODIFIED', node);
  }

  deleteNode(name: string): void {
    const node = this.getNode(name);
    this.#nodes.delete(name);
    this.#rv++;
    this.#record('DELETED', { ...node, metadata: { ...node.metadata, resourceVersion: String(this.#rv) } });
  }

  getNode(name: string): KubeNode {
    const node = this.#nodes.get(name);
    if (!node) throw new Error(`no node ${name}`);
    return node;
  }

  /** Forgets history up to now: watches from older resourceVersions get 410 Gone. */
  compact(): void {
    this.#compactedTo = this.#rv;
    this.#history.length = 0;
  }

  /** Ends every open watch, as an API server restart or a load balancer would. */
  dropWatches(): void {
    for (const w of this.#watchers) w.end();
    this.#watchers.clear();
  }

  bookmark(): void {
    const line = JSON.stringify({ type: 'BOOKMARK', object: { kind: 'Node', apiVersion: 'v1', metadata: { resourceVersion: String(this.#rv) } } });
    for (const w of this.#watchers) w.send(line);
  }

  #commit(type: 'ADDED' | 'MODIFIED', node: KubeNode): KubeNode {
    this.#rv++;
    const stored: KubeNode = { ...node, apiVersion: 'v1', kind: 'Node', metadata: { ...node.metadata, resourceVersion: String(this.#rv) } };
    this.#nodes.set(stored.metadata.name, stored);
    this.#record(type, stored);
    return stored;
  }

  #record(type: WatchEvent['type'], node: KubeNode): void {
    const event = { rv: this.#rv, type, node: structuredClone(node) };
    this.#history.push(event);
    const line = JSON.stringify({ type, object: event.node });
    for (const w of this.#watchers) w.send(line);
  }

  // --- REST

  async #handle(req: Http.IncomingMessage, res: Http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push(`${req.method} ${url.pathname}${url.search} ${req.headers['content-type'] ?? ''}`.trim());
    const status = (code: number, reason: string, message: string): void => {
      send(res, code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
    };
    if (req.headers.authorization !== `Bearer ${this.#token}`) return status(401, 'Unauthorized', 'Unauthorized');
    const m = /^\/api\/v1\/nodes(?:\/([^/]+))?(\/status)?$/.exec(url.pathname);
    if (!m) return status(404, 'NotFound', `the server could not find the requested resource (${url.pathname})`);
    const [, name, sub] = m;
    if (req.method === 'GET' && !name && url.searchParams.get('watch') === 'true') return this.#watch(url, res);
    if (req.method === 'GET' && !name) {
      return send(res, 200, { kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: String(this.#rv) }, items: [...this.#nodes.values()].map(strip) });
    }
    if (req.method === 'GET' && name && !sub) {
      const node = this.#nodes.get(name);
      return node ? send(res, 200, node) : status(404, 'NotFound', `nodes "${name}" not found`);
    }
    if (req.method === 'PATCH' && name && sub === '/status') {
      const node = this.#nodes.get(name);
      if (!node) return status(404, 'NotFound', `nodes "${name}" not found`);
      const type = (req.headers['content-type'] ?? '').split(';')[0];
      if (type !== 'application/strategic-merge-patch+json' && type !== 'application/merge-patch+json') {
        return status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`);
      }
      let patch: unknown;
      try {
        patch = JSON.parse(await body(req));
      } catch (err) {
        return status(400, 'BadRequest', `error decoding patch: ${(err as Error).message}`);
      }
      if (!isObject(patch)) return status(400, 'BadRequest', 'patch must be a JSON object');
      const next = mergePatch(structuredClone(node) as unknown as Record<string, unknown>, patch, type === 'application/strategic-merge-patch+json') as unknown as KubeNode;
      if (next.metadata.name !== name) return status(422, 'Invalid', 'metadata.name: field is immutable');
      return send(res, 200, this.#commit('MODIFIED', next));
    }
    return status(403, 'Forbidden', `nodes${sub ?? ''} is forbidden: User "system:serviceaccount:kube-flannel:flannel" cannot ${req.method?.toLowerCase()} resource "nodes${sub ?? ''}"`);
  }

  #watch(url: URL, res: Http.ServerResponse): void {
    const from = Number(url.searchParams.get('resourceVersion') ?? '0');
    const bookmarks = url.searchParams.get('allowWatchBookmarks') === 'true';
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    if (from !== 0 && from < this.#compactedTo) {
      res.end(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${this.#compactedTo})`, reason: 'Expired', code: 410 } }) + '\n');
      return;
    }
    const watcher = {
      send: (line: string) => void res.write(line + '\n'),
      end: () => res.end(),
    };
    if (from === 0) for (const node of this.#nodes.values()) watcher.send(JSON.stringify({ type: 'ADDED', object: node }));
    else for (const e of this.#history) if (e.rv > from) watcher.send(JSON.stringify({ type: e.type, object: e.node }));
    if (bookmarks) watcher.send(JSON.stringify({ type: 'BOOKMARK', object: { kind: 'Node', apiVersion: 'v1', metadata: { resourceVersion: String(this.#rv) } } }));
    this.#watchers.add(watcher);
    const timeout = Number(url.searchParams.get('timeoutSeconds') ?? '0');
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    res.on('close', () => {
      clearTimeout(timer);
      this.#watchers.delete(watcher);
    });
  }
}

/** List items carry no kind or apiVersion, as the real server sends them. */
function strip(n: KubeNode): KubeNode {
  const copy = { ...n };
  delete copy.apiVersion;
  delete copy.kind;
  return copy;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 merge patch; with `strategic`, lists of objects with `type` merge by that key (conditions). */
export function mergePatch(target: Record<string, unknown>, patch: Record<string, unknown>, strategic: boolean): Record<string, unknown> {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else if (isObject(v) && isObject(target[k])) target[k] = mergePatch(target[k] as Record<string, unknown>, v, strategic);
    else if (strategic && Array.isArray(v) && Array.isArray(target[k]) && v.every((x) => isObject(x) && typeof x['type'] === 'string')) {
      const list = [...(target[k] as Array<Record<string, unknown>>)];
      for (const item of v as Array<Record<string, unknown>>) {
        const i = list.findIndex((x) => x['type'] === item['type']);
        if (i >= 0) list[i] = mergePatch(structuredClone(list[i]!), item, strategic);
        else list.push(item);
      }
      target[k] = list;
    } else target[k] = structuredClone(v);
  }
  return target;
}

function send(res: Http.ServerResponse, code: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function body(req: Http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
