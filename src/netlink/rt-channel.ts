/**
 * Kernel writes in batches, and dumps, over one rtnetlink socket of weft's own framing.
 *
 * Writes made in one turn of the event loop go out together: many messages per `sendmsg`, each
 * without NLM_F_ACK but the last. The kernel handles a datagram's messages in order, answers only
 * the ones it refuses (an error always comes back) and acknowledges the last; once that answer is
 * in, every message before it without an error has succeeded. So 3000 entries cost 24 system
 * calls and answers instead of 3000 of each, and a refused entry fails alone: the messages after
 * it in the batch are still applied. One batch is in flight at a time, of at most 128 messages,
 * so that what the kernel may have to send back (every message refused) fits the socket's receive
 * buffer; writes made meanwhile wait for the next batch.
 *
 * Dumps and lookups (RTM_GETROUTE for an address) share the socket, one at a time, and are told
 * apart from the writes' answers by sequence number.
 */
import { constants } from 'node:os';
import { getU16, setU16, setU32 } from './bytes.js';
import { KernelError } from './netlink.js';
import type { DataListener, DatagramSocket } from './nl-socket.js';
import { NLMSG, NLM_F, type RawMessage, decodeError, splitMessages } from './rt-codec.js';

export interface ChannelOptions {
  /** A batch or dump left unanswered this long fails with ETIMEDOUT. Default 10 s. */
  readonly timeoutMs?: number;
  /**
   * The most messages in one `sendmsg`. Default 128: should every one be refused, the kernel's
   * answers (each a socket buffer of about 1 KB, whatever its length) still fit a receive buffer
   * of the kernel's default size (net.core.rmem_default, 208 KiB).
   */
  readonly batchMessages?: number;
  /** The sequence number before the first request's; random by default (another socket's answers cannot be taken for ours anyway: each has its own port). */
  readonly firstSeq?: number;
}

/** What a write does, for its error: a function, so that no text is made for the thousands that succeed. */
export type Describe = () => string;

interface Write {
  readonly msg: Buffer;
  readonly what: Describe;
  /** A deletion: an entry already gone is what was asked for. */
  readonly removal: boolean;
  resolve(): void;
  reject(err: KernelError): void;
}

interface Batch {
  readonly writes: Map<number, Write>;
  readonly lastSeq: number;
  readonly timer: NodeJS.Timeout;
}

/** A request with an answer: a dump (many parts, then NLMSG_DONE) or a lookup (one message). */
interface Query {
  readonly seq: number;
  readonly multi: boolean;
  readonly what: string;
  readonly parts: RawMessage[];
  readonly timer: NodeJS.Timeout;
  interrupted?: boolean;
  readonly acceptInterrupted: boolean;
  resolve(parts: RawMessage[]): void;
  reject(err: KernelError): void;
}

const NLM_F_DUMP = 0x300;
const NLM_F_DUMP_INTR = 0x10;
/**
 * An interrupted dump is asked for again, this many times in all; the last one is taken as it is
 * (as the `netlink` package took every one): the change that interrupted it is also announced to
 * the monitor, which makes another pass.
 */
const DUMP_TRIES = 3;

const errnoNames = new Map<number, string>();
for (const [name, value] of Object.entries(constants.errno)) if (!errnoNames.has(value)) errnoNames.set(value, name);
// Node lists ENOTSUP first for 95; the kernel, and the Netlink port's contract, say EOPNOTSUPP.
errnoNames.set(constants.errno.EOPNOTSUPP, 'EOPNOTSUPP');

export const errnoName = (errno: number): string => errnoNames.get(errno) ?? `errno ${errno}`;

/** Errors the kernel reports for an entry that is already gone. */
export function isGone(errno: string): boolean {
  return errno === 'ESRCH' || errno === 'ENOENT' || errno === 'EADDRNOTAVAIL' || errno === 'ENODEV';
}

export class RtChannel {
  readonly #socket: DatagramSocket;
  readonly #timeoutMs: number;
  readonly #batchMessages: number;
  #seq: number;
  #queue: Write[] = [];
  #flushing = false;
  #batch: Batch | undefined;
  #query: Query | undefined;
  #queries: Promise<unknown> = Promise.resolve();
  #closed = false;

  /** `open` makes the socket, given the listener for what it receives (nl-socket.ts, or a test's fake kernel). */
  constructor(open: (onData: DataListener) => DatagramSocket, options: ChannelOptions = {}) {
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#batchMessages = options.batchMessages ?? 128;
    this.#seq = options.firstSeq ?? Math.floor(Math.random() * 0x7fff_ffff);
    this.#socket = open((chunk, overflow) => {
      // Answers were dropped (ENOBUFS): what was in flight before this chunk may never be
      // answered; what the chunk completes, and what goes out after it, is not concerned.
      const batch = this.#batch;
      const query = this.#query;
      if (chunk) this.#receive(chunk);
      if (!overflow) return;
      const errno = errnoName(overflow);
      if (batch && this.#batch === batch) this.#endBatch(errno);
      if (query && this.#query === query) this.#endQuery(new KernelError(query.what, errno));
    });
  }

  /** One write; it goes out with the others made in the same turn. Rejects with a KernelError naming `what()`. */
  write(msg: Buffer, what: Describe, removal = false): Promise<void> {
    if (this.#closed) return Promise.reject(new KernelError(what(), 'EBADF'));
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ msg, what, removal, resolve, reject });
      if (!this.#flushing && !this.#batch) {
        this.#flushing = true;
        queueMicrotask(() => {
          this.#flushing = false;
          this.#send();
        });
      }
    });
  }

  /** A dump request's answer, every part. Queries go one at a time (the kernel serves one dump per socket). */
  dump(msg: Buffer, what: string): Promise<RawMessage[]> {
    return this.#enqueue(msg, what, true);
  }

  /** A request answered by one message (RTM_GETROUTE for an address). */
  request(msg: Buffer, what: string): Promise<RawMessage[]> {
    return this.#enqueue(msg, what, false);
  }

  #enqueue(msg: Buffer, what: string, multi: boolean): Promise<RawMessage[]> {
    const run = async (): Promise<RawMessage[]> => {
      for (let tries = 1; ; tries++) {
        try {
          return await this.#startQuery(msg, what, multi, tries === DUMP_TRIES);
        } catch (err) {
          if (!(err instanceof KernelError && err.errno === 'EINTR' && tries < DUMP_TRIES)) throw err;
        }
      }
    };
    const result = this.#queries.then(run, run);
    this.#queries = result.then(() => undefined, () => undefined);
    return result;
  }

  /** The socket's port id, where the socket has one (a test's fake kernel may not). */
  port(): number | undefined {
    return this.#socket.port?.();
  }

  close(): void {
    this.#closed = true;
    for (const w of this.#queue.splice(0)) w.reject(new KernelError(w.what(), 'EBADF'));
    this.#failAll('EBADF');
    this.#socket.close();
  }

  #nextSeq(): number {
    this.#seq = this.#seq >= 0xffff_fffe ? 1 : this.#seq + 1;
    return this.#seq;
  }

  #send(): void {
    if (this.#batch || this.#queue.length === 0 || this.#closed) return;
    const writes = new Map<number, Write>();
    const bufs: Buffer[] = [];
    let bytes = 0;
    let lastSeq = 0;
    let taken = 0;
    for (const w of this.#queue) {
      if (taken === this.#batchMessages) break;
      lastSeq = this.#nextSeq();
      setU32(w.msg, 8, lastSeq);
      setU16(w.msg, 6, getU16(w.msg, 6) & ~NLM_F.ACK);
      writes.set(lastSeq, w);
      bufs.push(w.msg);
      bytes += w.msg.length;
      taken++;
    }
    this.#queue = taken === this.#queue.length ? [] : this.#queue.slice(taken);
    const last = bufs[bufs.length - 1]!;
    setU16(last, 6, getU16(last, 6) | NLM_F.ACK);
    const timer = setTimeout(() => this.#endBatch('ETIMEDOUT'), this.#timeoutMs);
    this.#batch = { writes, lastSeq, timer };
    // The kernel has handled the batch when this returns; its answers arrive with the next read.
    const errno = this.#socket.send(bufs.length === 1 ? last : Buffer.concat(bufs, bytes));
    if (errno) this.#endBatch(errnoName(errno));
  }

  /** Settles what is left of the batch in flight (with `errno`, or as applied) and sends the next. */
  #endBatch(errno?: string): void {
    const batch = this.#batch;
    if (!batch) return;
    clearTimeout(batch.timer);
    this.#batch = undefined;
    for (const w of batch.writes.values()) {
      if (errno) w.reject(new KernelError(w.what(), errno));
      else w.resolve();
    }
    this.#send();
  }

  #startQuery(msg: Buffer, what: string, multi: boolean, acceptInterrupted = false): Promise<RawMessage[]> {
    if (this.#closed) return Promise.reject(new KernelError(what, 'EBADF'));
    return new Promise<RawMessage[]>((resolve, reject) => {
      const seq = this.#nextSeq();
      setU32(msg, 8, seq);
      setU16(msg, 6, getU16(msg, 6) | (multi ? NLM_F_DUMP : 0));
      const timer = setTimeout(() => this.#endQuery(new KernelError(what, 'ETIMEDOUT')), this.#timeoutMs);
      this.#query = { seq, multi, what, parts: [], timer, acceptInterrupted, resolve, reject };
      const errno = this.#socket.send(msg);
      if (errno) this.#endQuery(new KernelError(what, errnoName(errno)));
    });
  }

  #endQuery(err?: KernelError): void {
    const query = this.#query;
    if (!query) return;
    clearTimeout(query.timer);
    this.#query = undefined;
    if (err) query.reject(err);
    else query.resolve(query.parts);
  }

  #receive(datagram: Buffer): void {
    for (const m of splitMessages(datagram)) {
      const query = this.#query;
      if (query && m.seq === query.seq) {
        if (m.type === NLMSG.DONE) {
          // A dump the kernel cut short (an error in DONE), or one that a change interrupted
          // (NLM_F_DUMP_INTR on a part: it may have missed or repeated entries), is no listing.
          const errno = m.end - m.start >= 4 ? -m.buf.readInt32LE(m.start) : 0;
          this.#endQuery(errno > 0 ? new KernelError(query.what, errnoName(errno)) : query.interrupted && !query.acceptInterrupted ? new KernelError(query.what, 'EINTR') : undefined);
        }
        else if (m.type === NLMSG.ERROR) {
          const { errno } = decodeError(m);
          this.#endQuery(errno === 0 ? undefined : new KernelError(query.what, errnoName(errno)));
        } else {
          if (m.flags & NLM_F_DUMP_INTR) query.interrupted = true;
          query.parts.push(m);
          // A lookup's answer is one message; its acknowledgement may follow, and is then ignored.
          if (!query.multi) this.#endQuery();
        }
        continue;
      }
      if (m.type !== NLMSG.ERROR) continue;
      const batch = this.#batch;
      const w = batch?.writes.get(m.seq);
      if (!batch || !w) continue; // the answer to a batch that timed out
      const { errno } = decodeError(m);
      if (errno !== 0) {
        batch.writes.delete(m.seq);
        const name = errnoName(errno);
        if (w.removal && isGone(name)) w.resolve();
        else w.reject(new KernelError(w.what(), name));
      }
      if (m.seq === batch.lastSeq) this.#endBatch();
    }
  }

  #failAll(errno: string): void {
    this.#endBatch(errno);
    if (this.#query) this.#endQuery(new KernelError(this.#query.what, errno));
  }
}
