/**
 * An etcd v3 client over gRPC, as flanneld's clientv3 speaks it, on node:http2 with etcd's
 * messages encoded by weft (etcd-messages.ts). Chosen over @grpc/grpc-js by measurement
 * (docs/benchmarks.md).
 *
 * Design notes:
 * - The connections, one per endpoint in use, and their liveness (HTTP/2 PINGs while a watch is
 *   open) are grpc-connections.ts's; a connection that goes unanswered is closed and its endpoint
 *   left, so a half-open connection (a NAT timeout, a host gone without a FIN, a stopped member)
 *   is noticed within keepaliveMs + keepaliveTimeoutMs.
 * - A watch silent for keepaliveMs sends etcd a progress request; one unanswered for
 *   keepaliveTimeoutMs ends the watch: that proves the watch, not only the connection, and is what
 *   lastAlive() (the health check's word) reports.
 * - Every call carries etcd's `hasleader` metadata (clientv3's WithRequireLeader, which flanneld
 *   uses for its watches): a member that lost its quorum answers `unavailable` at once and
 *   cancels the watches it serves, and the client moves to the next endpoint.
 * - Failover: a call that cannot connect, gets no answer within its deadline, or gets
 *   `unavailable` goes to the next endpoint, each once, and sticks with the one that answered. A
 *   watch that breaks moves the client on too (the caller lists again and watches anew). Watches
 *   on an endpoint a call found failed follow the client: opened again elsewhere from the revision
 *   after the last they delivered, with no listing. A call answered by the old member after the
 *   client moved does not bring it back, and a connection to an endpoint other than the current
 *   one closes once nothing uses it: the client keeps one connection.
 * - Auth: with a username, a token from Authenticate goes in the `token` metadata; a rejected one
 *   (expired, or from before an auth change) is renewed once per call, by one Authenticate however
 *   many calls found it rejected. An etcd without auth takes no token (as clientv3). With a client
 *   certificate, etcd takes the user from its CommonName, and errors say so.
 * - Bounds: messages over `maxMessageBytes` are refused; every unary call has a deadline.
 */
import type * as Crypto from 'node:crypto';
import { errorCode, publish } from '../../core/events.js';
import { ErrorCodes, WeftError, errorMessage } from '../../core/errors.js';
import { abortReason } from '../../core/abort.js';
import { type Logger, silentLogger } from '../../core/log.js';
import { type Compare, type EtcdClient, type EtcdTls, type KeyValue, type RangeResult, type TxnOp, type TxnResult, type WatchBatch, grpcCode, prefixRangeEnd } from './etcd-client.js';
import { type EtcdEndpoint, parseEtcdEndpoint } from './etcd-endpoint.js';
import * as msg from './etcd-messages.js';
import { GrpcStatus } from './grpc-frame.js';
import { type Connection, GrpcConnections } from './grpc-connections.js';

export interface EtcdGrpcOptions {
  /** In flanneld's forms: `http(s)://host:port`, `host:port`, `unix(s)://path`; tried in order. */
  readonly endpoints: readonly string[];
  readonly tls?: EtcdTls;
  readonly username?: string;
  readonly password?: string;
  /** Deadline of one unary call, connecting included. Default 10 s. */
  readonly requestTimeoutMs?: number;
  /**
   * Silence on a connection with an open watch before an HTTP/2 PING, and on a watch before a
   * progress request. Default 10 s.
   */
  readonly keepaliveMs?: number;
  /** How long a PING or a progress request may go unanswered. Default half of keepaliveMs. */
  readonly keepaliveTimeoutMs?: number;
  /**
   * Silence on the watches before a progress request, when it must be shorter than keepaliveMs
   * (the health check wants word on the watch within three of its intervals). Default keepaliveMs.
   */
  readonly watchProgressMs?: number;
  /** The largest message accepted from etcd. Default 16 MiB. */
  readonly maxMessageBytes?: number;
  readonly log?: Logger;
}

export class EtcdGrpc implements EtcdClient {
  readonly #endpoints: readonly EtcdEndpoint[];
  readonly #tls: EtcdTls | undefined;
  readonly #timeoutMs: number;
  readonly #keepaliveTimeoutMs: number;
  readonly #progressMs: number;
  readonly #log: Logger;
  readonly #credentials: { name: string; password: string } | undefined;
  readonly #connections: GrpcConnections;
  #current = 0;
  /** undefined: not authenticated yet; null: etcd has auth off and takes no token. */
  #token: string | null | undefined;
  /** The Authenticate in flight, which every call that needs a token waits for. */
  #authenticating: Promise<void> | undefined;
  #closed = false;
  /** Ends what the client runs on its own (an Authenticate shared by several calls) at close. */
  readonly #life = new AbortController();
  /** Endpoints that failed and have not answered since (their failure was logged). */
  readonly #down = new Set<number>();
  /** When the current outage (no endpoint answering) began. */
  #lostAt: number | undefined;
  #lastAnswer = 0;
  /**
   * Open watches, by the connection each is on, and when a watch on that connection last heard
   * from etcd (ms since the epoch): one progress request speaks for all the watches of a member.
   */
  readonly #watches = new Map<Connection, { heard: number; open: number }>();
  /** Per endpoint, the watches open or being opened there, each ended by aborting its controller (#leave). */
  readonly #leaving = new Map<number, Set<AbortController>>();
  /** Counts the client's moves to another endpoint: a call that began before one does not undo it. */
  #moves = 0;

  constructor(options: EtcdGrpcOptions) {
    if (options.endpoints.length === 0) throw new WeftError(ErrorCodes.CONFIG, 'no etcd endpoints given');
    this.#endpoints = options.endpoints.map((e) => parseEtcdEndpoint(e, options.tls !== undefined));
    this.#tls = options.tls;
    this.#timeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#log = options.log ?? silentLogger;
    this.#credentials = options.username ? { name: options.username, password: options.password ?? '' } : undefined;
    const keepaliveMs = options.keepaliveMs ?? 10_000;
    this.#keepaliveTimeoutMs = options.keepaliveTimeoutMs ?? Math.ceil(keepaliveMs / 2);
    this.#progressMs = Math.min(keepaliveMs, options.watchProgressMs ?? keepaliveMs);
    this.#connections = new GrpcConnections({
      endpoints: this.#endpoints,
      tls: options.tls,
      callTimeoutMs: this.#timeoutMs,
      keepaliveMs,
      keepaliveTimeoutMs: this.#keepaliveTimeoutMs,
      maxMessageBytes: options.maxMessageBytes ?? 16 * 2 ** 20,
      log: this.#log,
      onRead: (at) => (this.#lastAnswer = at),
      onDead: (c, err) => this.#moveOn(c, err),
    });
  }

  async range(key: string, options: { prefix?: boolean; pageSize?: number; signal: AbortSignal }): Promise<RangeResult> {
    const kvs: KeyValue[] = [];
    let revision = 0;
    for await (const page of this.rangePages(key, options)) {
      revision = page.revision;
      for (const kv of page.kvs) kvs.push(kv);
    }
    return { revision, kvs };
  }

  async *rangePages(key: string, options: { prefix?: boolean; pageSize?: number; signal: AbortSignal }): AsyncGenerator<RangeResult> {
    const rangeEnd = options.prefix ? prefixRangeEnd(key) : undefined;
    const limit = options.prefix ? (options.pageSize ?? 500) : 0;
    let from: Buffer = Buffer.from(key, 'utf8');
    let revision = 0;
    for (;;) {
      const req = msg.encodeRange({ key: from, ...(rangeEnd ? { rangeEnd } : {}), limit, revision });
      const page = msg.decodeRange(await this.#unary(msg.EtcdMethods.range, req, options.signal, key));
      revision ||= page.revision;
      yield { revision, kvs: page.kvs };
      const last = page.kvs[page.kvs.length - 1];
      if (!page.more || !last) return;
      from = Buffer.concat([Buffer.from(last.key, 'utf8'), Buffer.from([0])]);
    }
  }

  async txn(compare: readonly Compare[], success: readonly TxnOp[], signal: AbortSignal): Promise<TxnResult> {
    const key = compare[0]?.key ?? '';
    return msg.decodeTxn(await this.#unary(msg.EtcdMethods.txn, msg.encodeTxn(compare, success), signal, key));
  }

  async put(key: string, value: string, signal: AbortSignal): Promise<number> {
    return msg.decodeRevision(await this.#unary(msg.EtcdMethods.put, msg.encodePut({ key, value }), signal, key));
  }

  async deleteRange(key: string, options: { prefix?: boolean; signal: AbortSignal }): Promise<number> {
    const req = msg.encodeDeleteRange({ key, ...(options.prefix ? { rangeEnd: prefixRangeEnd(key) } : {}) });
    return msg.decodeRevision(await this.#unary(msg.EtcdMethods.deleteRange, req, options.signal, key));
  }

  async leaseGrant(ttlSeconds: number, signal: AbortSignal): Promise<{ id: string; ttlSeconds: number }> {
    const res = msg.decodeLeaseGrant(await this.#unary(msg.EtcdMethods.leaseGrant, msg.encodeLeaseGrant(ttlSeconds), signal, ''));
    if (res.error !== '') throw new WeftError(ErrorCodes.ETCD, `etcd refused a lease: ${res.error}`);
    if (res.id === '0') throw new WeftError(ErrorCodes.PROTOCOL, 'etcd granted a lease without an ID');
    return { id: res.id, ttlSeconds: res.ttl || ttlSeconds };
  }

  async leaseTimeToLive(id: string, signal: AbortSignal): Promise<number | undefined> {
    const ttl = msg.decodeTimeToLive(await this.#unary(msg.EtcdMethods.leaseTimeToLive, msg.encodeLeaseId(id), signal, ''));
    return ttl >= 0 ? ttl : undefined;
  }

  async leaseRevoke(id: string, signal: AbortSignal): Promise<void> {
    try {
      await this.#unary(msg.EtcdMethods.leaseRevoke, msg.encodeLeaseId(id), signal, '');
    } catch (err) {
      if (grpcCode(err) === GrpcStatus.NOT_FOUND) return;
      throw err;
    }
  }

  async compact(revision: number, signal: AbortSignal): Promise<void> {
    await this.#unary(msg.EtcdMethods.compact, msg.encodeCompact(revision), signal, '');
  }

  /** Any other unary call, with its request encoded by the caller (the tests' auth set-up, say). */
  call(method: string, request: Buffer, signal: AbortSignal): Promise<Buffer> {
    return this.#unary(method, request, signal, '');
  }

  async *watch(key: string, options: { prefix?: boolean; startRevision: number; signal: AbortSignal }): AsyncGenerator<WatchBatch> {
    const { signal } = options;
    let from = options.startRevision;
    // After leaving an endpoint: where to open again (the call that failed there may not have
    // reached the next one yet, so the client's current endpoint may still be the failed one).
    let start: number | undefined;
    for (;;) {
      const create = msg.encodeWatchCreate({ key, ...(options.prefix ? { rangeEnd: prefixRangeEnd(key) } : {}), startRevision: from });
      // Ends the watch's stream when a progress request goes unanswered.
      const watchdog = new AbortController();
      // Opening (up to etcd's answer to the create request) fails over as a unary call does; after
      // that, a break ends the watch and the caller lists again.
      const { call, first, leave } = await this.#failover(msg.EtcdMethods.watch, signal, key, async (index, deadline, token) => {
        // Ends the stream when a call finds this endpoint failed (#leave), from the moment it is asked for.
        const leave = this.#track(index, new AbortController());
        const opened = this.#connections.call(index, msg.EtcdMethods.watch, create, AbortSignal.any([deadline, watchdog.signal, leave.signal]), { stream: true, ...token });
        try {
          const it = opened.messages[Symbol.asyncIterator]();
          const head = await it.next();
          if (head.done) throw new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${this.#endpoints[index]!.shown} ended the watch before creating it`);
          const res = msg.decodeWatchResponse(head.value);
          // A watch etcd will not create (no rights, an expired token) is refused as a call is.
          if (res.canceled && res.compactRevision === 0) throw cancelError(res.cancelReason, this.#endpoints[index]!);
          return { call: { ...opened, it }, first: res, leave };
        } catch (err) {
          this.#untrack(index, leave);
          opened.close();
          throw err;
        }
      }, start === undefined ? {} : { start });
      const connection = call.connection;
      // A watch "from now" goes on, wherever it is opened again, from the revision it was created at.
      if (from === 0 && !first.canceled) from = first.revision + 1;
      const heard = this.#watches.get(connection) ?? { heard: Date.now(), open: 0 };
      heard.open++;
      heard.heard = Date.now();
      this.#watches.set(connection, heard);
      const idle = this.#watchIdle(heard, call.send, watchdog, connection);
      try {
        let res = first;
        for (;;) {
          if (res.canceled) {
            if (res.compactRevision > 0) {
              throw new WeftError(ErrorCodes.COMPACTED, `watch from revision ${from} is compacted (oldest kept: ${res.compactRevision})`);
            }
            throw cancelError(res.cancelReason, this.#endpoints[connection.index]!);
          }
          if (res.events.length > 0) {
            // etcd never splits one revision's events between responses (without fragmenting,
            // which weft does not ask for): a watch opened again starts after the last one here.
            // Not after a progress answer's revision, as clientv3 does: etcd before 3.4.25 and
            // 3.5.8 could answer one beyond events it had yet to send (etcd issue 15220); a quiet
            // watch that meets a compaction when it moves lists again instead.
            from = res.events[res.events.length - 1]!.kv.modRevision + 1;
            yield { revision: res.revision, events: res.events };
          }
          const next = await call.it.next();
          if (next.done) throw new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${this.#endpoints[connection.index]!.shown} closed the watch stream`);
          heard.heard = Date.now();
          res = msg.decodeWatchResponse(next.value);
        }
      } catch (err) {
        if (signal.aborted) throw abortReason(signal);
        if (!leave.signal.aborted) {
          // The caller lists again and watches anew; from the next endpoint, when this one broke.
          if (isEndpointFailure(err)) this.#moveOn(connection, err);
          throw err;
        }
        this.#log.info({ endpoint: this.#endpoints[connection.index]!.shown, fromRevision: from }, 'etcd watch follows the client off a failed endpoint');
        start = this.#current === connection.index ? (connection.index + 1) % this.#endpoints.length : this.#current;
      } finally {
        clearInterval(idle);
        this.#untrack(connection.index, leave);
        if (--heard.open === 0 && this.#watches.get(connection) === heard) this.#watches.delete(connection);
        call.close();
        this.#release(connection.index);
      }
    }
  }

  #track(index: number, leave: AbortController): AbortController {
    let on = this.#leaving.get(index);
    if (!on) this.#leaving.set(index, (on = new Set()));
    on.add(leave);
    return leave;
  }

  #untrack(index: number, leave: AbortController): void {
    const on = this.#leaving.get(index);
    if (on?.delete(leave) && on.size === 0) this.#leaving.delete(index);
  }

  /**
   * A call found endpoint `index` failed and went on to another: the watches there (or being
   * opened there) follow it, each opened again on the client's endpoint from the revision after the
   * last it delivered, as clientv3 resumes a watch on a new connection, so the caller need not list
   * again. Left where they were, they would keep a second connection open, on a member the client
   * has given up on (one that lost its leader answers calls `unavailable` at once, but cancels the
   * watches it serves only after several election timeouts without one, and not if it finds one
   * sooner).
   */
  #leave(index: number): void {
    if (this.#endpoints.length < 2) return;
    for (const l of this.#leaving.get(index) ?? []) l.abort(new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${this.#endpoints[index]!.shown} failed a call`));
  }

  /**
   * Endpoint `index` answered a call that began at `start`: the client sticks with it, unless the
   * call went there on its first try while another call moved the client on (an answer that left
   * before the failure must not bring the calls back to a member the watches have just left).
   */
  #answered(index: number, start: number, moves: number): void {
    const was = this.#current;
    if (index !== start || this.#moves === moves) this.#current = index;
    this.#release(index);
    if (was !== this.#current) this.#release(was);
  }

  /** A connection to an endpoint other than the current one is not kept once nothing uses it. */
  #release(index: number): void {
    const c = this.#connections.get(index);
    if (c && c.streams === 0 && index !== this.#current) this.#connections.drop(c);
  }

  /**
   * When no watch on the connection has heard from etcd for watchProgressMs, this one asks for its
   * progress (a member that serves the watch answers at once); no answer within
   * keepaliveTimeoutMs ends it. One answer speaks for all the member's watches: an agent asks
   * about once per interval, not once per watch.
   */
  #watchIdle(heard: { heard: number }, send: (m: Buffer) => void, watchdog: AbortController, connection: Connection): NodeJS.Timeout {
    let askedAt = 0;
    const tick = Math.max(50, Math.min(this.#progressMs, this.#keepaliveTimeoutMs) / 4);
    const timer = setInterval(() => {
      const now = Date.now();
      if (askedAt > 0 && heard.heard >= askedAt) askedAt = 0;
      if (askedAt > 0 && now - askedAt > this.#keepaliveTimeoutMs) {
        clearInterval(timer);
        watchdog.abort(new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${this.#endpoints[connection.index]!.shown} did not answer a watch progress request within ${this.#keepaliveTimeoutMs} ms`));
      } else if (askedAt === 0 && now - heard.heard >= this.#progressMs) {
        askedAt = now;
        send(msg.watchProgressRequest);
      }
    }, tick);
    timer.unref();
    return timer;
  }

  /**
   * While watches are open, the oldest moment one of them last heard from etcd (an event, an
   * answered progress request); otherwise when etcd last answered a call.
   */
  lastAlive(): number {
    let oldest = Infinity;
    for (const w of this.#watches.values()) oldest = Math.min(oldest, w.heard);
    return Number.isFinite(oldest) ? oldest : this.#lastAnswer;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#life.abort(new WeftError(ErrorCodes.UNAVAILABLE, 'etcd client is closed'));
    this.#connections.close();
  }

  async #unary(method: string, request: Buffer, signal: AbortSignal, key: string, how: { tokenless?: boolean; start?: number } = {}): Promise<Buffer> {
    return this.#failover(
      method,
      signal,
      key,
      async (index, deadline, token) => {
        const call = this.#connections.call(index, method, request, deadline, { stream: false, ...token });
        try {
          let answer: Buffer | undefined;
          for await (const m of call.messages) answer = m;
          if (answer === undefined) throw new WeftError(ErrorCodes.PROTOCOL, `etcd at ${this.#endpoints[index]!.shown} answered ${method} with no message`);
          return answer;
        } finally {
          call.close();
        }
      },
      how,
    );
  }

  /**
   * Runs `attempt` on the current endpoint and, when it fails as an endpoint fails (unreachable,
   * no answer within the deadline, `unavailable`), on the next ones, each once. A rejected token
   * is renewed and the same endpoint tried again, once.
   */
  async #failover<T>(
    method: string,
    signal: AbortSignal,
    key: string,
    attempt: (index: number, deadline: AbortSignal, token: { token?: string }) => Promise<T>,
    how: { tokenless?: boolean; start?: number } = {},
  ): Promise<T> {
    const auth = !how.tokenless && this.#credentials !== undefined;
    // The endpoints are tried from where this call began, whatever other calls do meanwhile.
    const start = how.start ?? this.#current;
    const moves = this.#moves;
    if (auth && this.#token === undefined) await this.#authenticate(signal, start, undefined);
    const failures: string[] = [];
    let lastError: unknown;
    let reauthed = false;
    for (let tried = 0; tried < this.#endpoints.length; tried++) {
      if (this.#closed) throw new WeftError(ErrorCodes.UNAVAILABLE, 'etcd client is closed');
      const index = (start + tried) % this.#endpoints.length;
      const endpoint = this.#endpoints[index]!;
      const timer = new AbortController();
      const timeout = setTimeout(() => timer.abort(new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${endpoint.shown} did not answer ${method} within ${this.#timeoutMs} ms`)), this.#timeoutMs);
      const deadline = AbortSignal.any([signal, timer.signal]);
      const used = auth ? this.#token : undefined;
      try {
        const result = await attempt(index, deadline, typeof used === 'string' ? { token: used } : {});
        this.#reached(index);
        this.#answered(index, start, moves);
        return result;
      } catch (caught) {
        if (signal.aborted) throw abortReason(signal);
        if (this.#closed) throw new WeftError(ErrorCodes.UNAVAILABLE, 'etcd client is closed');
        const err = timer.signal.aborted ? (timer.signal.reason as unknown) : caught;
        if (timer.signal.aborted) this.#connections.dropIfSilent(index, err);
        if (auth && !reauthed && staleToken(err)) {
          // The token expired, or etcd's auth changed since it was issued: a new one, same endpoint.
          reauthed = true;
          await this.#authenticate(signal, index, used);
          tried--;
          continue;
        }
        if (!isEndpointFailure(err)) {
          this.#answered(index, start, moves);
          this.#lastAnswer = Date.now();
          publish('registry.error', { code: errorCode(err) });
          throw this.#explained(err, method, key, endpoint);
        }
        lastError = err;
        // A TLS failure says which certificate was offered: often the wrong one is the cause.
        failures.push(endpoint.secure && /ssl|tls|certificate|alert/i.test(errorMessage(err)) ? `${errorMessage(err)} (as ${this.#identity()})` : errorMessage(err));
        this.#failed(index, err);
        this.#moves++;
        // A failed endpoint's connection is not kept for later; its watches follow the client and
        // drop it once they are gone.
        const idle = this.#connections.get(index);
        if (idle && idle.streams === 0) this.#connections.drop(idle);
        this.#leave(index);
      } finally {
        clearTimeout(timeout);
      }
    }
    const err = new WeftError(ErrorCodes.UNAVAILABLE, `no etcd endpoint answered ${method}: ${failures.join('; ')}`, { cause: lastError });
    this.#lost(err);
    throw err;
  }

  /** A refusal for want of rights or credentials says who asked, for what, and what etcd said. */
  #explained(err: unknown, method: string, key: string, endpoint: EtcdEndpoint): unknown {
    const code = grpcCode(err);
    const denied =
      code === GrpcStatus.PERMISSION_DENIED ||
      code === GrpcStatus.UNAUTHENTICATED ||
      (code === GrpcStatus.INVALID_ARGUMENT && /authentication failed|user name is empty/i.test(errorMessage(err)));
    if (!denied) return err;
    const what = key ? ` on ${JSON.stringify(key)}` : '';
    const denial = new WeftError(ErrorCodes.ETCD_DENIED, `etcd at ${endpoint.shown} refused ${method}${what} for ${this.#identity()}: ${errorMessage(err)}`, { cause: err });
    Object.defineProperty(denial, 'grpcCode', { value: code });
    return denial;
  }

  /** Who the client is to etcd: the user it authenticated as, else its certificate's CommonName. */
  #identity(): string {
    if (this.#credentials) return `user ${JSON.stringify(this.#credentials.name)} (--etcd-username)`;
    if (this.#tls) {
      try {
        const { X509Certificate } = process.getBuiltinModule('node:crypto') as typeof Crypto;
        const cn = /(?:^|\n)CN=([^\n]*)/.exec(new X509Certificate(this.#tls.cert).subject)?.[1];
        return cn === undefined ? 'a client certificate without a CommonName' : `user ${JSON.stringify(cn)} (the client certificate's CommonName)`;
      } catch {
        return 'the client certificate (unreadable)';
      }
    }
    return 'no user (neither --etcd-username nor a client certificate)';
  }

  /**
   * Gets a token, starting at endpoint `start`. One Authenticate serves every call waiting for it;
   * a call whose `rejected` token was already replaced by another call's goes on with the new one.
   */
  async #authenticate(signal: AbortSignal, start: number, rejected: string | null | undefined): Promise<void> {
    if (!this.#authenticating) {
      if (rejected !== undefined && this.#token !== rejected) return;
      this.#token = undefined;
      this.#authenticating = this.#newToken(start);
    }
    const pending = this.#authenticating;
    // Waits as long as this call may; the Authenticate goes on for the others.
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => reject(abortReason(signal));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  /** One Authenticate, from endpoint `start`, bounded by the client's life rather than by one caller. */
  async #newToken(start: number): Promise<void> {
    try {
      const { name, password } = this.#credentials!;
      const life = AbortSignal.any([this.#life.signal, AbortSignal.timeout(this.#timeoutMs * this.#endpoints.length)]);
      const res = await this.#unary(msg.EtcdMethods.authenticate, msg.encodeAuthenticate(name, password), life, '', { tokenless: true, start });
      const token = msg.decodeToken(res);
      if (token === '') throw new WeftError(ErrorCodes.PROTOCOL, 'etcd authenticated without a token');
      this.#token = token;
    } catch (err) {
      // As clientv3: credentials for an etcd that has auth off are no error; it takes no token.
      if (grpcCode(err) === GrpcStatus.FAILED_PRECONDITION && /not enabled/.test(errorMessage(err))) this.#token = null;
      else throw err;
    } finally {
      this.#authenticating = undefined;
    }
  }

  /**
   * The endpoint of connection `c` broke a watch or the connection: the next call starts at the
   * next endpoint, and the connection is closed, so that the other watches on it (cancelled as
   * well when the member lost its leader) start again elsewhere too.
   */
  #moveOn(c: Connection, err: unknown): void {
    this.#failed(c.index, err);
    if (this.#endpoints.length < 2) return;
    if (this.#current === c.index) {
      this.#current = (c.index + 1) % this.#endpoints.length;
      this.#moves++;
    }
    this.#connections.drop(c, err instanceof Error ? err : undefined);
  }

  /** An endpoint answered: the end of an outage, if there was one, is logged once, with its length. */
  #reached(index: number): void {
    this.#lastAnswer = Date.now();
    publish('registry.contact', { reachable: true, registry: 'etcd' });
    this.#down.delete(index);
    if (this.#lostAt !== undefined) {
      this.#log.info({ endpoint: this.#endpoints[index]!.shown, downMs: Date.now() - this.#lostAt }, 'etcd is reachable again');
      this.#lostAt = undefined;
    }
  }

  /** An endpoint failed: logged once until it answers again, not on every call. */
  #failed(index: number, err: unknown): void {
    publish('registry.error', { code: errorCode(err) });
    if (this.#down.has(index)) return;
    this.#down.add(index);
    if (this.#endpoints.length > 1) this.#log.warn({ endpoint: this.#endpoints[index]!.shown, reason: errorMessage(err) }, 'etcd endpoint failed; trying the next one');
  }

  /** No endpoint answered: logged once per outage. */
  #lost(err: WeftError): void {
    publish('registry.contact', { reachable: false, registry: 'etcd' });
    if (this.#lostAt !== undefined) return;
    this.#lostAt = Date.now();
    this.#log.error({ endpoints: this.#endpoints.map((e) => e.shown), reason: err.message }, 'lost contact with etcd; retrying');
  }
}

/** A token etcd no longer takes: expired, from before a restart, or from before an auth change. */
function staleToken(err: unknown): boolean {
  const code = grpcCode(err);
  return code === GrpcStatus.UNAUTHENTICATED || (code === GrpcStatus.INVALID_ARGUMENT && /auth.*old|old.*revision/i.test(errorMessage(err)));
}

/** A watch etcd cancelled, as the error of a call refused for the same reason would be. */
function cancelError(reason: string, endpoint: EtcdEndpoint): WeftError {
  const code = /permission denied/i.test(reason)
    ? GrpcStatus.PERMISSION_DENIED
    : /invalid auth token/i.test(reason)
      ? GrpcStatus.UNAUTHENTICATED
      : GrpcStatus.UNAVAILABLE;
  const err = new WeftError(code === GrpcStatus.UNAVAILABLE ? ErrorCodes.UNAVAILABLE : ErrorCodes.ETCD, `etcd at ${endpoint.shown} cancelled the watch: ${reason || 'no reason given'}`);
  Object.defineProperty(err, 'grpcCode', { value: code });
  return err;
}

/**
 * Not whether to retry (core/errors.ts isRetriable says that) but where: failures that say nothing
 * about the request, only about the endpoint, go to the next endpoint at once.
 */
function isEndpointFailure(err: unknown): boolean {
  return err instanceof WeftError && (err.code === ErrorCodes.UNAVAILABLE || err.code === ErrorCodes.PROTOCOL);
}
