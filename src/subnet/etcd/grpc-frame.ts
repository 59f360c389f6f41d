/**
 * gRPC over HTTP/2, the parts that are not HTTP/2 itself (grpc/doc/PROTOCOL-HTTP2.md): messages
 * are length-prefixed (one flag byte, four bytes of length), and the call's outcome is in the
 * `grpc-status` and `grpc-message` trailers (or headers, for a call that fails at once). Pure.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';

/** gRPC status codes weft acts on. */
export const GrpcStatus = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  FAILED_PRECONDITION: 9,
  OUT_OF_RANGE: 11,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

export function frameMessage(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

/** Splits a response body into messages, however HTTP/2 cut it; refuses compressed or oversized ones. */
export class FrameDecoder {
  readonly #maxBytes: number;
  #pending: Buffer[] = [];
  #pendingBytes = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** The messages `chunk` completes, in order. */
  push(chunk: Buffer): Buffer[] {
    this.#pending.push(chunk);
    this.#pendingBytes += chunk.length;
    const out: Buffer[] = [];
    while (this.#pendingBytes >= 5) {
      const head = this.#peek(5);
      if (head[0] !== 0) throw new WeftError(ErrorCodes.PROTOCOL, `etcd sent a compressed gRPC message (flag ${head[0]}), which was not asked for`);
      const length = head.readUInt32BE(1);
      if (length > this.#maxBytes) throw new WeftError(ErrorCodes.PROTOCOL, `etcd sent a gRPC message of ${length} bytes, over the limit of ${this.#maxBytes}`);
      if (this.#pendingBytes < 5 + length) break;
      const whole = this.#take(5 + length);
      out.push(whole.subarray(5));
    }
    return out;
  }

  /** Bytes of an incomplete message left over (a body that ended here was cut short). */
  get leftover(): number {
    return this.#pendingBytes;
  }

  #peek(n: number): Buffer {
    const first = this.#pending[0]!;
    if (first.length >= n) return first;
    this.#pending = [Buffer.concat(this.#pending)];
    return this.#pending[0]!;
  }

  #take(n: number): Buffer {
    const all = this.#peek(n);
    const taken = all.subarray(0, n);
    const rest = all.subarray(n);
    this.#pending[0] = rest;
    if (rest.length === 0) this.#pending.shift();
    this.#pendingBytes -= n;
    return taken;
  }
}

export interface GrpcOutcome {
  readonly code: number;
  readonly message: string;
}

/**
 * The status of a finished call from its trailers (or headers); undefined when neither carries
 * one, which is a broken call, not a success.
 */
export function grpcOutcome(fields: Readonly<Record<string, string | string[] | undefined>>): GrpcOutcome | undefined {
  const raw = first(fields['grpc-status']);
  if (raw === undefined || !/^[0-9]+$/.test(raw)) return undefined;
  const text = first(fields['grpc-message']) ?? '';
  let message = text;
  try {
    message = decodeURIComponent(text);
  } catch {
    // Not percent-encoded as the protocol asks: shown as it came.
  }
  return { code: Number(raw), message };
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** A deadline as the `grpc-timeout` header says it: at most eight digits and a unit. */
export function grpcTimeout(ms: number): string {
  const whole = Math.max(1, Math.ceil(ms));
  return whole < 1e8 ? `${whole}m` : `${Math.ceil(whole / 1000)}S`;
}
