/**
 * One informer for Nodes per agent, as client-go's reflector: list, then watch from the list's
 * resourceVersion; the own lease, the peers and the health check all read it, so the agent puts
 * one list+watch on the API server, as flanneld does, and nothing else.
 *
 * Design notes:
 * - Lists as client-go makes them: the first with `resourceVersion=0` (any version, so the API
 *   server answers from its watch cache) in pages of `limit=500` following `continue`; later ones
 *   "not older than" the last version seen, unpaged; after a 410 Expired or a 504 "too large"
 *   (an API server restored from an older etcd) from the most recent version (`""`), paged. A
 *   continue token that expires mid-list (410) falls back to one unpaged list.
 * - A watch that ends cleanly (its timeoutSeconds, 5-10 min at random as client-go) resumes from
 *   the last resourceVersion seen, bookmarks included, with no list. A 410, an ERROR event, a
 *   stream that breaks (mid-event too) or any failure leads to a new list, whose difference to the
 *   cache is delivered as put/delete changes, so a consumer never misses a change.
 * - Failures wait for the server's Retry-After when it gave one, else a backoff of 0.8 s doubling
 *   to 30 s that starts over only after two minutes without a failure (client-go's), so a server
 *   that breaks every stream soon after opening it gets a list every 30 s, not every second.
 *   Each failure is logged once; the first success after them says so.
 * - The cache keeps NodeRecords (name, pod CIDRs, flannel annotations), not Node objects, and
 *   lists are decoded one Node at a time as they arrive, so a list is never held whole.
 * - contactAt(): the last list, event or bookmark; while a watch is open, also the connection's
 *   own liveness (an HTTP/2 PING answered), so an idle cluster stays healthy without requests.
 */
import { errorCode, publish } from '../../core/events.js';
import { AsyncQueue } from '../../core/async-queue.js';
import { delay } from '../../core/abort.js';
import { Backoff, type BackoffOptions } from '../../core/backoff.js';
import { ErrorCodes, isWeftError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { type NodeRecord, type NodeRecords, sameNodeRecord } from './annotations.js';
import { KubeApiError, type NodeApi } from './kube-client.js';

export type NodeChange = { readonly type: 'put' | 'delete'; readonly node: NodeRecord };

/** Failure-free time after which the backoff starts over (client-go's reflector: 2 minutes). */
const stableMs = 120_000;

export interface NodeInformerOptions {
  readonly api: NodeApi;
  /** Turns Node objects into what the cache keeps (flannel's annotations only). */
  readonly records: NodeRecords;
  readonly log: Logger;
  readonly pageSize?: number;
  readonly backoff?: BackoffOptions;
  /** The watch's timeoutSeconds; default 300-600 at random, as client-go. */
  readonly watchTimeoutSeconds?: () => number;
}

interface Subscriber {
  readonly queue: AsyncQueue<NodeChange[]>;
  primed: boolean;
}

export class NodeInformer {
  readonly #api: NodeApi;
  readonly #records: NodeRecords;
  readonly #log: Logger;
  readonly #pageSize: number;
  readonly #backoff: Backoff;
  readonly #watchTimeout: () => number;
  #cache = new Map<string, NodeRecord>();
  readonly #subscribers = new Set<Subscriber>();
  readonly #synced: Promise<void>;
  #markSynced: () => void = () => undefined;
  #isSynced = false;
  #watching = false;
  #contact = 0;
  readonly #skipped = new Set<string>();

  constructor(options: NodeInformerOptions) {
    this.#api = options.api;
    this.#records = options.records;
    this.#log = options.log;
    this.#pageSize = options.pageSize ?? 500;
    this.#backoff = new Backoff({ initialMs: 800, maxMs: 30_000, ...options.backoff });
    this.#watchTimeout = options.watchTimeoutSeconds ?? (() => 300 + Math.floor(Math.random() * 300));
    this.#synced = new Promise((resolve) => (this.#markSynced = resolve));
  }

  get size(): number {
    return this.#cache.size;
  }

  get(name: string): NodeRecord | undefined {
    return this.#cache.get(name);
  }

  /**
   * Records a Node this agent has just written (the answer to its PATCH), so that readers see the
   * write before the watch brings its echo, which then changes nothing. Returns its record.
   */
  observe(raw: unknown): NodeRecord | undefined {
    const record = this.#record(raw);
    if (record && this.#isSynced) this.#apply('put', record);
    return record;
  }

  /** Resolves once the first list is in the cache. */
  whenSynced(signal: AbortSignal): Promise<void> {
    if (this.#isSynced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      void this.#synced.then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** When the informer last knew its view to be current (ms since the epoch; 0: never). */
  contactAt(): number {
    return this.#watching ? Math.max(this.#contact, this.#api.lastAlive()) : this.#contact;
  }

  /**
   * Batches of changes: first every Node as a put (once synced; possibly none), then each change.
   * Ends when `signal` aborts.
   */
  async *changes(signal: AbortSignal): AsyncGenerator<NodeChange[]> {
    const sub: Subscriber = { queue: new AsyncQueue(), primed: false };
    if (this.#isSynced) {
      sub.queue.push(this.#snapshot());
      sub.primed = true;
    }
    this.#subscribers.add(sub);
    try {
      while (!signal.aborted) {
        let batch: NodeChange[];
        try {
          batch = await sub.queue.next(signal);
        } catch (err) {
          if (signal.aborted) return;
          throw err;
        }
        yield batch;
      }
    } finally {
      this.#subscribers.delete(sub);
    }
  }

  /** Lists and watches until `signal` aborts; failures are logged and retried, never thrown. */
  async run(signal: AbortSignal): Promise<void> {
    let resumeAt: string | undefined;
    let listFrom = '0';
    let failures = 0;
    let failingSince = 0;
    /** When the last failure's wait began: two quiet minutes after it, the backoff starts over. */
    let lastWait = 0;
    while (!signal.aborted) {
      let listing = false;
      try {
        if (resumeAt === undefined) {
          listing = true;
          resumeAt = await this.#list(listFrom, signal);
          listFrom = resumeAt;
          listing = false;
        }
        const events = await this.#api.watchNodes({ resourceVersion: resumeAt, timeoutSeconds: this.#watchTimeout() }, signal);
        this.#watching = true;
        this.#contact = Date.now();
        publish('registry.contact', { reachable: true, registry: 'kubernetes' });
        if (failures > 0) {
          this.#log.info({ failures, downMs: Date.now() - failingSince }, 'node list/watch works again');
          failures = 0;
        }
        for await (const ev of events) {
          this.#contact = Date.now();
          if (ev.type === 'BOOKMARK') {
            resumeAt = ev.resourceVersion;
            continue;
          }
          const rv = (ev.object['metadata'] as Record<string, unknown> | undefined)?.['resourceVersion'];
          if (typeof rv === 'string' && rv !== '') resumeAt = rv;
          const record = this.#record(ev.object);
          if (record) this.#apply(ev.type === 'DELETED' ? 'delete' : 'put', record);
        }
        this.#watching = false;
        this.#log.debug({ resourceVersion: resumeAt }, 'node watch ended; watching again');
      } catch (err) {
        this.#watching = false;
        if (signal.aborted) return;
        // As client-go, the next list is "not older than" the last version seen, watch events included.
        if (!listing && resumeAt !== undefined) listFrom = resumeAt;
        resumeAt = undefined;
        // The version listed from is gone (410) or not there yet (504: a server restored from an
        // older etcd): list the most recent state instead.
        if (listing && err instanceof KubeApiError && (err.status === 410 || err.status === 504)) listFrom = '';
        if (failures++ === 0) failingSince = Date.now();
        if (Date.now() - lastWait >= stableMs) this.#backoff.reset();
        lastWait = Date.now();
        publish('watch.restart', { reason: isWeftError(err, ErrorCodes.COMPACTED) ? 'compacted' : 'broken' });
        publish('registry.error', { code: errorCode(err) });
        if (failures === 1) publish('registry.contact', { reachable: false, registry: 'kubernetes' });
        const retryAfter = err instanceof KubeApiError ? err.retryAfterMs : undefined;
        const waitMs = retryAfter ?? this.#backoff.next();
        if (isWeftError(err, ErrorCodes.COMPACTED)) this.#log.info({ err, retryMs: waitMs }, `node ${listing ? 'list' : 'watch'} expired (410 Gone); listing again`);
        else this.#log.warn({ err, retryMs: waitMs, ...(retryAfter !== undefined ? { retryAfter: true } : {}) }, 'node list/watch failed; listing again');
        try {
          await delay(waitMs, signal);
        } catch {
          return;
        }
      }
    }
  }

  /** One complete list into the cache; returns its resourceVersion. */
  async #list(resourceVersion: string, signal: AbortSignal): Promise<string> {
    // As client-go: an exact version is served from the API server's cache, whole; the others in pages.
    const paged = resourceVersion === '0' || resourceVersion === '';
    let fresh = new Map<string, NodeRecord>();
    const onItem = (item: unknown): void => {
      const record = this.#record(item);
      if (record) fresh.set(record.name, record);
    };
    let page = await this.#api.listNodes({ resourceVersion, ...(paged ? { limit: this.#pageSize } : {}) }, { signal, onItem });
    // Every page belongs to the first page's snapshot.
    let listedAt = page.resourceVersion;
    let pages = 1;
    while (page.continue !== undefined) {
      try {
        page = await this.#api.listNodes({ continue: page.continue, limit: this.#pageSize }, { signal, onItem });
      } catch (err) {
        if (!isWeftError(err, ErrorCodes.COMPACTED)) throw err;
        this.#log.info({ err }, 'node list: the continue token expired; listing again in one piece');
        fresh = new Map();
        page = await this.#api.listNodes({ resourceVersion }, { signal, onItem });
        listedAt = page.resourceVersion;
        pages++;
        break;
      }
      pages++;
    }
    this.#replace(fresh);
    this.#contact = Date.now();
    this.#log.info({ nodes: fresh.size, pages, resourceVersion: listedAt }, 'nodes listed');
    return listedAt;
  }

  #record(raw: unknown): NodeRecord | undefined {
    const record = this.#records.record(raw);
    if (!record) {
      const text = JSON.stringify(raw)?.slice(0, 120) ?? String(raw);
      if (!this.#skipped.has(text)) this.#log.warn({ node: text }, 'skipping a Node object without a name');
      // Remembered to warn once each; bounded, as what it holds comes from the server.
      if (this.#skipped.size < 100) this.#skipped.add(text);
    }
    return record;
  }

  /** Makes `fresh` the cache; the difference goes to every subscriber. */
  #replace(fresh: Map<string, NodeRecord>): void {
    const changes: NodeChange[] = [];
    for (const [name, old] of this.#cache) if (!fresh.has(name)) changes.push({ type: 'delete', node: old });
    for (const [name, record] of fresh) {
      const old = this.#cache.get(name);
      if (!old || !sameNodeRecord(old, record)) changes.push({ type: 'put', node: record });
    }
    this.#cache = fresh;
    const first = !this.#isSynced;
    this.#isSynced = true;
    for (const sub of this.#subscribers) {
      if (!sub.primed) sub.queue.push(this.#snapshot());
      else if (changes.length > 0) sub.queue.push(changes);
      sub.primed = true;
    }
    if (first) this.#markSynced();
  }

  #apply(type: NodeChange['type'], record: NodeRecord): void {
    const name = record.name;
    const old = this.#cache.get(name);
    if (type === 'delete') {
      if (!old) return;
      this.#cache.delete(name);
    } else {
      if (old && sameNodeRecord(old, record)) return;
      this.#cache.set(name, record);
    }
    const batch = [{ type, node: type === 'delete' ? old! : record }];
    for (const sub of this.#subscribers) if (sub.primed) sub.queue.push(batch);
  }

  #snapshot(): NodeChange[] {
    return [...this.#cache.values()].map((node) => ({ type: 'put', node }));
  }
}
