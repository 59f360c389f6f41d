/**
 * The batching channel against an in-memory kernel that answers as rtnetlink does: messages of a
 * datagram handled in order, an error for each refused one, an acknowledgement only where
 * NLM_F_ACK asks for one, dumps in parts ending with NLMSG_DONE. The real kernel's side is
 * rtnetlink.netns.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { constants } from 'node:os';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import type { DataListener, DatagramSocket } from './nl-socket.js';
import { RtChannel } from './rt-channel.js';
import { NLMSG, NLMSG_HDRLEN, NLM_F, RTM, type RawMessage, decodeRoute, encodeDump, encodeRoute, splitMessages } from './rt-codec.js';

function message(type: number, flags: number, seq: number, body: Buffer): Buffer {
  const out = Buffer.alloc(NLMSG_HDRLEN + body.length);
  out.writeUInt32LE(out.length, 0);
  out.writeUInt16LE(type, 4);
  out.writeUInt16LE(flags, 6);
  out.writeUInt32LE(seq, 8);
  body.copy(out, NLMSG_HDRLEN);
  return out;
}

function errorMessage(seq: number, errno: number): Buffer {
  const body = Buffer.alloc(4 + NLMSG_HDRLEN);
  body.writeInt32LE(-errno, 0);
  return message(NLMSG.ERROR, 0, seq, body);
}

/** Routes by destination; `refuse` names the destinations the kernel refuses, and with what. */
class FakeKernel implements DatagramSocket {
  readonly routes = new Set<string>();
  readonly refuse = new Map<string, number>();
  /** Messages per sendmsg, in order. */
  readonly sends: number[] = [];
  /** Per sendmsg, the indexes of its messages that asked for an acknowledgement; and every sequence number seen. */
  readonly acked: number[][] = [];
  readonly seqs: number[] = [];
  /** When set, datagrams are held (a kernel that does not answer yet) until `release`. */
  hold = false;
  /** Dumps answered as interrupted by a change (NLM_F_DUMP_INTR), and the errno a dump's DONE carries. */
  interruptDumps = 0;
  dumpErrno = 0;
  readonly #held: Buffer[] = [];
  closed = false;
  #onData: DataListener = () => undefined;

  /** The channel's socket, reading into `onData`. */
  socket = (onData: DataListener): DatagramSocket => {
    this.#onData = onData;
    return this;
  };

  send(datagram: Buffer): number {
    const msgs = splitMessages(datagram);
    this.sends.push(msgs.length);
    this.acked.push(msgs.flatMap((m, i) => (m.flags & NLM_F.ACK ? [i] : [])));
    this.seqs.push(...msgs.map((m) => m.seq));
    const answers: Buffer[] = [];
    for (const m of msgs) {
      if (m.type === RTM.GETROUTE) {
        // NLM_F_MULTI, and NLM_F_DUMP_INTR while `interruptDumps` lasts.
        const flags = 2 | (this.interruptDumps-- > 0 ? 0x10 : 0);
        for (const dst of this.routes) answers.push(message(RTM.NEWROUTE, flags, m.seq, encodeRoute(RTM.NEWROUTE, 0, { dst: parseCidr(dst), index: 2 }, 87).subarray(NLMSG_HDRLEN)));
        const done = Buffer.alloc(4);
        done.writeInt32LE(-this.dumpErrno, 0);
        answers.push(message(NLMSG.DONE, 2, m.seq, done));
        continue;
      }
      const route = decodeRoute(m)!;
      const dst = `${route.dst.ip.family === 4 ? [24, 16, 8, 0].map((s) => (Number(route.dst.ip.value) >> s) & 255).join('.') : '?'}/${route.dst.prefix}`;
      const refused = this.refuse.get(dst) ?? (m.type === RTM.DELROUTE && !this.routes.has(dst) ? constants.errno.ESRCH : 0);
      if (!refused) {
        if (m.type === RTM.NEWROUTE) this.routes.add(dst);
        else this.routes.delete(dst);
      }
      if (refused || m.flags & NLM_F.ACK) answers.push(errorMessage(m.seq, refused));
    }
    // Read on a later turn of the event loop, every answer at once (as nl-socket.c reads them).
    setImmediate(() => this.#deliver(Buffer.concat(answers)));
    return 0;
  }

  #deliver(chunk: Buffer): void {
    if (this.hold) this.#held.push(chunk);
    else if (chunk.length > 0) this.#onData(chunk, 0);
  }

  release(): void {
    this.hold = false;
    for (const d of this.#held.splice(0)) this.#onData(d, 0);
  }

  /** The held answers, and an overflow, in one wake-up. */
  releaseWithOverflow(): void {
    this.#onData(Buffer.concat(this.#held.splice(0)), constants.errno.ENOBUFS);
  }

  /** The socket's receive buffer overflowed: answers were dropped. */
  overflow(): void {
    this.#onData(undefined, constants.errno.ENOBUFS);
  }

  close(): void {
    this.closed = true;
  }
}

const route = (i: number): Parameters<typeof encodeRoute>[2] => ({ dst: parseCidr(`198.19.${i >> 2}.${(i & 3) * 64}/26`), gateway: parseIp('203.0.113.7'), index: 2 });
const put = (ch: RtChannel, i: number): Promise<void> => ch.write(encodeRoute(RTM.NEWROUTE, NLM_F.CREATE | NLM_F.REPLACE, route(i), 87), () => `replace route ${i}`);
const del = (ch: RtChannel, i: number): Promise<void> => ch.write(encodeRoute(RTM.DELROUTE, 0, route(i), 0), () => `delete route ${i}`, true);

test('writes made together go out 128 to a system call, one batch at a time, and all land', async () => {
  const kernel = new FakeKernel();
  const ch = new RtChannel(kernel.socket);
  await Promise.all(Array.from({ length: 300 }, (_, i) => put(ch, i)));
  assert.deepEqual(kernel.sends, [128, 128, 44]);
  assert.equal(kernel.routes.size, 300);
  // A lone write still goes out, by itself.
  await put(ch, 300);
  assert.deepEqual(kernel.sends.slice(3), [1]);
});

test('only the last message of a batch asks for an acknowledgement; sequence numbers wrap past 2^32 - 2 to 1, never 0', async () => {
  const kernel = new FakeKernel();
  const ch = new RtChannel(kernel.socket, { firstSeq: 0xffff_fffc });
  await Promise.all(Array.from({ length: 130 }, (_, i) => put(ch, i)));
  assert.deepEqual(kernel.acked, [[127], [1]]);
  assert.deepEqual(kernel.seqs.slice(0, 4), [0xffff_fffd, 0xffff_fffe, 1, 2]);
  assert.equal(new Set(kernel.seqs).size, 130);
  assert.equal(kernel.routes.size, 130);
});

test('a refused write fails alone with the kernel\'s errno; the writes after it in its batch are applied', async () => {
  const kernel = new FakeKernel();
  kernel.refuse.set('198.19.2.128/26', constants.errno.ENODEV);
  const ch = new RtChannel(kernel.socket);
  const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => put(ch, i)));
  const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [{ i, code: (r.reason as { code: string }).code, errno: (r.reason as { errno: string }).errno, message: (r.reason as Error).message }] : []));
  assert.deepEqual(failed, [{ i: 10, code: 'WEFT_ERR_KERNEL', errno: 'ENODEV', message: 'replace route 10: ENODEV' }]);
  assert.equal(kernel.routes.size, 19);
  // The last message of a batch refused: its answer also ends the batch.
  kernel.refuse.set('198.19.4.192/26', constants.errno.EINVAL);
  const last = await Promise.allSettled([put(ch, 18), put(ch, 19)]);
  assert.deepEqual(last.map((r) => r.status), ['fulfilled', 'rejected']);
});

test('deleting what is already gone succeeds; other refusals of a deletion fail', async () => {
  const kernel = new FakeKernel();
  const ch = new RtChannel(kernel.socket);
  await put(ch, 1);
  await Promise.all([del(ch, 1), del(ch, 2)]);
  assert.equal(kernel.routes.size, 0);
  kernel.refuse.set('198.19.0.192/26', constants.errno.EPERM);
  await assert.rejects(del(ch, 3), { code: 'WEFT_ERR_KERNEL', errno: 'EPERM' });
});

test('writes made while a batch is in flight wait for its answer, then go out together', async () => {
  const kernel = new FakeKernel();
  kernel.hold = true;
  const ch = new RtChannel(kernel.socket);
  const first = put(ch, 0);
  await new Promise((r) => setImmediate(r));
  const more = [1, 2, 3].map((i) => put(ch, i));
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(kernel.sends, [1], 'nothing more is sent before the answer');
  kernel.release();
  await Promise.all([first, ...more]);
  assert.deepEqual(kernel.sends, [1, 3]);
});

test('an unanswered batch fails with ETIMEDOUT and the next one goes out; a late answer is ignored', async () => {
  const kernel = new FakeKernel();
  kernel.hold = true;
  const ch = new RtChannel(kernel.socket, { timeoutMs: 20 });
  await assert.rejects(put(ch, 0), { code: 'WEFT_ERR_KERNEL', errno: 'ETIMEDOUT' });
  const next = put(ch, 1);
  kernel.release();
  await next;
  assert.deepEqual(kernel.sends, [1, 1]);
});

test('an overflow of the socket (answers dropped) fails the batch in flight with ENOBUFS; later writes go on', async () => {
  const kernel = new FakeKernel();
  kernel.hold = true;
  const ch = new RtChannel(kernel.socket);
  const lost = put(ch, 0);
  await new Promise((r) => setImmediate(r));
  kernel.overflow();
  await assert.rejects(lost, { errno: 'ENOBUFS' });
  kernel.release();
  await put(ch, 1);
});

test('a dump collects every part until NLMSG_DONE, while writes are answered beside it', async () => {
  const kernel = new FakeKernel();
  const ch = new RtChannel(kernel.socket);
  await Promise.all([0, 1, 2].map((i) => put(ch, i)));
  const [parts] = await Promise.all([ch.dump(encodeDump(RTM.GETROUTE, 2), 'list routes'), put(ch, 3)]);
  // The write and the dump race; either order is right, and the dump holds routes only.
  assert.ok(parts.length === 3 || parts.length === 4, `${parts.length} parts`);
  assert.ok(parts.every((m: RawMessage) => decodeRoute(m)?.dst.prefix === 26));
  const again = await ch.dump(encodeDump(RTM.GETROUTE, 2), 'list routes');
  assert.equal(again.length, 4);
});

test('after close, pending and new requests fail with EBADF', async () => {
  const kernel = new FakeKernel();
  kernel.hold = true;
  const ch = new RtChannel(kernel.socket);
  const inFlight = put(ch, 0);
  await new Promise((r) => setImmediate(r));
  const queued = put(ch, 1);
  ch.close();
  await assert.rejects(inFlight, { errno: 'EBADF' });
  await assert.rejects(queued, { errno: 'EBADF' });
  await assert.rejects(put(ch, 2), { errno: 'EBADF' });
  await assert.rejects(ch.dump(encodeDump(RTM.GETROUTE, 2), 'list routes'), { errno: 'EBADF' });
  assert.equal(kernel.closed, true);
});

test('a dump a change interrupted (NLM_F_DUMP_INTR) is asked for again, three times in all, the last taken as it is; one cut short by an error fails with it', async () => {
  const kernel = new FakeKernel();
  const ch = new RtChannel(kernel.socket);
  await Promise.all([0, 1].map((i) => put(ch, i)));
  kernel.interruptDumps = 2;
  assert.equal((await ch.dump(encodeDump(RTM.GETROUTE, 2), 'list routes')).length, 2);
  assert.equal(kernel.sends.length, 1 + 3, 'the batch, and three dumps');
  // Interrupted every time: the third listing is taken as it is (the monitor hears of the change).
  kernel.interruptDumps = 3;
  assert.equal((await ch.dump(encodeDump(RTM.GETROUTE, 2), 'list routes')).length, 2);
  assert.equal(kernel.sends.length, 1 + 3 + 3);
  kernel.dumpErrno = constants.errno.ENOBUFS;
  await assert.rejects(ch.dump(encodeDump(RTM.GETROUTE, 2), 'list routes'), { errno: 'ENOBUFS' });
});

test('an overflow reported with the answer that ends a batch fails neither that batch nor the next', async () => {
  const kernel = new FakeKernel();
  kernel.hold = true;
  const ch = new RtChannel(kernel.socket);
  const first = put(ch, 0);
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  const second = put(ch, 1);
  kernel.hold = false;
  // The first batch's answer and an overflow in one wake-up: the first batch has its answer, and
  // the second goes out after the overflow happened.
  kernel.releaseWithOverflow();
  await first;
  await second;
  assert.deepEqual(kernel.sends, [1, 1]);
});
