/**
 * The protobuf wire format (proto3), as much of it as etcd's messages use: varints (int64, bool,
 * enums), length-delimited fields (bytes, strings, nested messages) and skipping of anything else.
 * Pure; no I/O. A generated codec would pull in a runtime library for the dozen messages weft
 * sends; docs/benchmarks.md has the measurement behind the choice.
 *
 * int64 fields travel as 10-byte two's-complement varints when negative. Revisions are read as
 * numbers (they stay far below 2^53); 64-bit IDs (etcd leases) as decimal strings.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

/** Builds one message; nested messages are encoded first and added as bytes. */
export class ProtoWriter {
  readonly #parts: Buffer[] = [];
  #scratch: number[] = [];

  #flushScratch(): void {
    if (this.#scratch.length === 0) return;
    this.#parts.push(Buffer.from(this.#scratch));
    this.#scratch = [];
  }

  #varint(value: bigint): void {
    let v = BigInt.asUintN(64, value);
    while (v > 0x7fn) {
      this.#scratch.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.#scratch.push(Number(v));
  }

  #smallVarint(value: number): void {
    let v = value;
    while (v > 0x7f) {
      this.#scratch.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    this.#scratch.push(v);
  }

  #tag(field: number, wire: number): void {
    this.#smallVarint(field * 8 + wire);
  }

  /** An int64 / uint64 / enum field; zero is proto3's default and is left out unless `always` (a oneof member). */
  int(field: number, value: number | bigint | string, always = false): this {
    const v = typeof value === 'bigint' ? value : BigInt(value);
    if (v === 0n && !always) return this;
    this.#tag(field, WIRE_VARINT);
    if (v >= 0n && v <= 0x1fffffffffffffn) this.#smallVarint(Number(v));
    else this.#varint(v);
    return this;
  }

  bool(field: number, value: boolean): this {
    if (!value) return this;
    this.#tag(field, WIRE_VARINT);
    this.#scratch.push(1);
    return this;
  }

  /** A bytes, string or message field; empty ones are left out unless `always`. */
  bytes(field: number, value: Buffer | string, always = false): this {
    const data = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
    if (data.length === 0 && !always) return this;
    this.#tag(field, WIRE_BYTES);
    this.#smallVarint(data.length);
    this.#flushScratch();
    this.#parts.push(data);
    return this;
  }

  finish(): Buffer {
    this.#flushScratch();
    return this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts);
  }
}

function malformed(what: string): WeftError {
  return new WeftError(ErrorCodes.PROTOCOL, `malformed protobuf message from etcd: ${what}`);
}

/**
 * Reads a message field by field: `next()` moves to the next field, and the caller reads the
 * value as what it knows the field to be (`int`, `id`, `bytes`, `text`) or leaves it, and `next`
 * skips it. No allocation for numbers: most varints are read without bigint arithmetic.
 */
export class ProtoReader {
  readonly #buf: Buffer;
  #pos = 0;
  /** Where the current field's value starts, and its wire type. */
  #valueAt = 0;
  #wire = -1;
  field = 0;

  constructor(buf: Buffer) {
    this.#buf = buf;
  }

  /** Moves to the next field; false at the end of the message. */
  next(): boolean {
    if (this.#wire >= 0) this.#skip();
    if (this.#pos >= this.#buf.length) return false;
    const tag = this.#smallVarint();
    this.field = Math.floor(tag / 8);
    this.#wire = tag % 8;
    if (this.field === 0) throw malformed('field number 0');
    this.#valueAt = this.#pos;
    return true;
  }

  /** A varint field as a signed 64-bit number; past 2^53 it is a protocol error. */
  int(): number {
    this.#expect(WIRE_VARINT);
    this.#pos = this.#valueAt;
    const start = this.#pos;
    let n = 0;
    let mul = 1;
    while (this.#pos - start < 7) {
      if (this.#pos >= this.#buf.length) throw malformed('a varint runs past the end');
      const b = this.#buf[this.#pos++]!;
      n += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) {
        this.#wire = -1;
        return n;
      }
      mul *= 128;
    }
    this.#pos = start;
    this.#wire = -1;
    const v = Number(BigInt.asIntN(64, this.#bigVarint()));
    if (!Number.isSafeInteger(v)) throw malformed(`field ${this.field}: an integer beyond 2^53`);
    return v;
  }

  /** A varint field as a decimal string of the signed 64-bit value (etcd lease IDs use all 64 bits). */
  id(): string {
    this.#expect(WIRE_VARINT);
    this.#pos = this.#valueAt;
    this.#wire = -1;
    return BigInt.asIntN(64, this.#bigVarint()).toString();
  }

  bool(): boolean {
    return this.int() !== 0;
  }

  /** A length-delimited field's bytes (a view into the message, not a copy). */
  bytes(): Buffer {
    this.#expect(WIRE_BYTES);
    this.#pos = this.#valueAt;
    const length = this.#smallVarint();
    if (this.#pos + length > this.#buf.length) throw malformed(`field ${this.field} runs past the end`);
    const out = this.#buf.subarray(this.#pos, this.#pos + length);
    this.#pos += length;
    this.#wire = -1;
    return out;
  }

  text(): string {
    return this.bytes().toString('utf8');
  }

  #expect(wire: number): void {
    if (this.#wire !== wire) throw malformed(`field ${this.field} has wire type ${this.#wire}, expected ${wire}`);
  }

  #skip(): void {
    this.#pos = this.#valueAt;
    const wire = this.#wire;
    this.#wire = -1;
    if (wire === WIRE_VARINT) this.#skipVarint();
    else if (wire === WIRE_BYTES) {
      // Read the length first: `pos += varint()` would add it to the position before the varint.
      const length = this.#smallVarint();
      this.#pos += length;
    }
    else if (wire === WIRE_FIXED64) this.#pos += 8;
    else if (wire === WIRE_FIXED32) this.#pos += 4;
    else throw malformed(`wire type ${wire} of field ${this.field}`);
    if (this.#pos > this.#buf.length) throw malformed(`field ${this.field} runs past the end`);
  }

  #smallVarint(): number {
    let n = 0;
    let mul = 1;
    for (;;) {
      if (this.#pos >= this.#buf.length) throw malformed('a varint runs past the end');
      const b = this.#buf[this.#pos++]!;
      n += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) return n;
      mul *= 128;
      if (mul > 2 ** 49) throw malformed('a length or tag is too large');
    }
  }

  /** Passes over a varint without computing it (cluster and member IDs in every header). */
  #skipVarint(): void {
    for (let n = 0; n < 10; n++) {
      if (this.#pos >= this.#buf.length) throw malformed('a varint runs past the end');
      if ((this.#buf[this.#pos++]! & 0x80) === 0) return;
    }
    throw malformed('a varint is longer than 10 bytes');
  }

  #bigVarint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.#pos >= this.#buf.length) throw malformed('a varint runs past the end');
      const b = this.#buf[this.#pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 63n) throw malformed('a varint is longer than 10 bytes');
    }
  }
}
