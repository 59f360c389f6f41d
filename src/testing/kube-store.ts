/**
 * The Node store behind the in-test API server, with kube-apiserver's list and watch semantics
 * (https://kubernetes.io/docs/reference/using-api/api-concepts/):
 * - every write bumps one cluster-wide resourceVersion; history is kept until `compact()`;
 * - lists: `resourceVersion` "0" (any), "" (most recent) or "N" (not older than N; newer than the
 *   store → 504 "Too large resource version"); `limit` pages with a `continue` token bound to the
 *   snapshot the first page was read at, 410 Expired once that snapshot is compacted away;
 * - watches from N replay history after N; N older than the compaction point → 410 Expired.
 * Pure: no I/O, so the server's tests and its restarts (toJSON/fromJSON) share it.
 */
export interface KubeNode {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec: { podCIDR?: string; podCIDRs?: string[] };
  status: Record<string, unknown> & { conditions?: Array<Record<string, unknown>> };
}

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  readonly rv: number;
  readonly type: WatchType;
  readonly node: KubeNode;
}

/** A kube-apiserver Status failure. */
export interface StatusError {
  readonly code: number;
  readonly reason: string;
  readonly message: string;
  readonly details?: Record<string, unknown>;
}

export interface ListResult {
  readonly items: KubeNode[];
  readonly resourceVersion: string;
  readonly continue?: string;
  readonly remainingItemCount?: number;
}

export interface ListQuery {
  readonly resourceVersion?: string | null;
  readonly limit?: number;
  readonly continue?: string | null;
  /** A server may return fewer items than asked (kube-apiserver does); tests use it to force pages. */
  readonly pageCap?: number;
}

export class NodeStore {
  readonly #nodes = new Map<string, KubeNode>();
  readonly #history: StoreEvent[] = [];
  readonly #listeners = new Set<(e: StoreEvent) => void>();
  /** Snapshots that continue tokens point into, by resourceVersion. */
  readonly #snapshots = new Map<number, KubeNode[]>();
  #rv: number;
  #compactedTo: number;

  constructor(state?: { rv: number; nodes: KubeNode[] }) {
    this.#rv = state?.rv ?? 100;
    // A restarted API server starts with an empty watch cache: older watches get 410.
    this.#compactedTo = state ? state.rv : 0;
    for (const n of state?.nodes ?? []) this.#nodes.set(n.metadata.name, n);
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  get size(): number {
    return this.#nodes.size;
  }

  toJSON(): { rv: number; nodes: KubeNode[] } {
    return { rv: this.#rv, nodes: [...this.#nodes.values()] };
  }

  get(name: string): KubeNode | undefined {
    return this.#nodes.get(name);
  }

  /** Stores `node` as new (ADDED) or changed (MODIFIED); returns it as stored. */
  put(node: KubeNode): KubeNode {
    const type = this.#nodes.has(node.metadata.name) ? 'MODIFIED' : 'ADDED';
    this.#rv++;
    const stored: KubeNode = { ...node, apiVersion: 'v1', kind: 'Node', metadata: { ...node.metadata, resourceVersion: String(this.#rv) } };
    this.#nodes.set(stored.metadata.name, stored);
    this.#record(type, stored);
    return stored;
  }

  delete(name: string): boolean {
    const node = this.#nodes.get(name);
    if (!node) return false;
    this.#nodes.delete(name);
    this.#rv++;
    this.#record('DELETED', { ...node, metadata: { ...node.metadata, resourceVersion: String(this.#rv) } });
    return true;
  }

  /** Forgets history and page snapshots up to now, as etcd compaction does. */
  compact(): void {
    this.#compactedTo = this.#rv;
    this.#history.length = 0;
    this.#snapshots.clear();
  }

  subscribe(listener: (e: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  list(query: ListQuery): ListResult | StatusError {
    const limit = Math.min(query.limit ?? 0, query.pageCap ?? Infinity) || Infinity;
    let snapshotRv: number;
    let items: KubeNode[];
    let start = '';
    if (query.continue) {
      if (query.resourceVersion) return badRequest('specifying resource version is not allowed when using continue');
      const token = decodeContinue(query.continue);
      if (!token) return badRequest('continue key is not valid: invalid token');
      const snapshot = this.#snapshots.get(token.rv);
      if (token.rv < this.#compactedTo || !snapshot) return expiredContinue();
      snapshotRv = token.rv;
      items = snapshot;
      start = token.start;
    } else {
      const rv = query.resourceVersion ?? '';
      if (rv !== '' && rv !== '0') {
        const n = Number(rv);
        if (!Number.isSafeInteger(n) || n < 0) return badRequest(`invalid resource version: ${rv}`);
        if (n > this.#rv) return tooLarge(n, this.#rv);
      }
      snapshotRv = this.#rv;
      items = [...this.#nodes.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
    }
    const from = start === '' ? 0 : items.findIndex((n) => n.metadata.name > start);
    const rest = from < 0 ? [] : items.slice(from);
    const page = rest.slice(0, limit);
    if (page.length === rest.length) return { items: page, resourceVersion: String(snapshotRv) };
    this.#snapshots.set(snapshotRv, items);
    return {
      items: page,
      resourceVersion: String(snapshotRv),
      continue: encodeContinue({ rv: snapshotRv, start: page[page.length - 1]!.metadata.name }),
      remainingItemCount: rest.length - page.length,
    };
  }

  /** What a watch from `resourceVersion` starts with, or why it cannot start. */
  replay(resourceVersion: string | null): StoreEvent[] | StatusError {
    const rv = resourceVersion ?? '';
    if (rv === '' || rv === '0') {
      return [...this.#nodes.values()].map((node) => ({ rv: this.#rv, type: 'ADDED', node }));
    }
    const n = Number(rv);
    if (!Number.isSafeInteger(n) || n < 0) return badRequest(`invalid resource version: ${rv}`);
    if (n < this.#compactedTo) {
      return { code: 410, reason: 'Expired', message: `too old resource version: ${n} (${this.#compactedTo})` };
    }
    if (n > this.#rv) return tooLarge(n, this.#rv);
    return this.#history.filter((e) => e.rv > n);
  }

  #record(type: WatchType, node: KubeNode): void {
    const event = { rv: this.#rv, type, node: structuredClone(node) };
    this.#history.push(event);
    for (const l of this.#listeners) l(event);
  }
}

function badRequest(message: string): StatusError {
  return { code: 400, reason: 'BadRequest', message };
}

function tooLarge(asked: number, current: number): StatusError {
  return {
    code: 504,
    reason: 'Timeout',
    message: `Timeout: Too large resource version: ${asked}, current: ${current}`,
    details: { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }], retryAfterSeconds: 1 },
  };
}

function expiredContinue(): StatusError {
  return {
    code: 410,
    reason: 'Expired',
    message:
      'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
  };
}

function encodeContinue(token: { rv: number; start: string }): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: token.rv, start: token.start })).toString('base64url');
}

function decodeContinue(text: string): { rv: number; start: string } | undefined {
  try {
    const t = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as { rv?: unknown; start?: unknown };
    return typeof t.rv === 'number' && typeof t.start === 'string' ? { rv: t.rv, start: t.start } : undefined;
  } catch {
    return undefined;
  }
}
