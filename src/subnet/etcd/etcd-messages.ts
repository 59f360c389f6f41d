/**
 * The etcd v3 messages weft sends and reads (api/etcdserverpb/rpc.proto, api/mvccpb/kv.proto),
 * encoded and decoded by field number. Pure. Field numbers are etcd's wire contract, stable since
 * v3.0; the tests check them against a real etcd. In proto3 an empty field and an absent one are
 * the same, so only oneof members and repeated elements are written when empty (`always`).
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import type { Compare, KeyValue, TxnOp, WatchEvent } from './etcd-client.js';
import { ProtoReader, ProtoWriter } from './proto-wire.js';

/** The gRPC method paths of the calls weft makes. */
export const EtcdMethods = {
  range: '/etcdserverpb.KV/Range',
  put: '/etcdserverpb.KV/Put',
  deleteRange: '/etcdserverpb.KV/DeleteRange',
  txn: '/etcdserverpb.KV/Txn',
  compact: '/etcdserverpb.KV/Compact',
  watch: '/etcdserverpb.Watch/Watch',
  leaseGrant: '/etcdserverpb.Lease/LeaseGrant',
  leaseRevoke: '/etcdserverpb.Lease/LeaseRevoke',
  leaseTimeToLive: '/etcdserverpb.Lease/LeaseTimeToLive',
  authenticate: '/etcdserverpb.Auth/Authenticate',
} as const;

type Bytes = Buffer | string;

export function encodeRange(r: { key: Bytes; rangeEnd?: Bytes; limit?: number; revision?: number }): Buffer {
  return new ProtoWriter()
    .bytes(1, r.key)
    .bytes(2, r.rangeEnd ?? '')
    .int(3, r.limit ?? 0)
    .int(4, r.revision ?? 0)
    .finish();
}

export function encodePut(p: { key: Bytes; value: Bytes; lease?: string }): Buffer {
  return new ProtoWriter()
    .bytes(1, p.key)
    .bytes(2, p.value)
    .int(3, p.lease ?? 0)
    .finish();
}

export function encodeDeleteRange(d: { key: Bytes; rangeEnd?: Bytes }): Buffer {
  return new ProtoWriter().bytes(1, d.key).bytes(2, d.rangeEnd ?? '').finish();
}

/** Compare.target: VERSION 0, MOD 2; result EQUAL is 0 and so left out. */
function encodeCompare(c: Compare): Buffer {
  const w = new ProtoWriter();
  if (c.target === 'VERSION') {
    // A version of 0 (the key does not exist) is still sent: a oneof member set to 0 is not absent.
    return w.bytes(3, c.key).int(4, c.version, true).finish();
  }
  return w.int(2, 2).bytes(3, c.key).int(6, c.modRevision, true).finish();
}

function encodeOp(op: TxnOp): Buffer {
  if ('put' in op) return new ProtoWriter().bytes(2, encodePut(op.put), true).finish();
  return new ProtoWriter().bytes(3, encodeDeleteRange({ key: op.deleteRange.key }), true).finish();
}

export function encodeTxn(compare: readonly Compare[], success: readonly TxnOp[]): Buffer {
  const w = new ProtoWriter();
  for (const c of compare) w.bytes(1, encodeCompare(c), true);
  for (const op of success) w.bytes(2, encodeOp(op), true);
  return w.finish();
}

export function encodeCompact(revision: number): Buffer {
  return new ProtoWriter().int(1, revision).bool(2, true).finish();
}

export function encodeLeaseGrant(ttlSeconds: number): Buffer {
  return new ProtoWriter().int(1, ttlSeconds).finish();
}

/** LeaseRevokeRequest and LeaseTimeToLiveRequest: the ID in field 1. */
export function encodeLeaseId(id: string): Buffer {
  return new ProtoWriter().int(1, id).finish();
}

export function encodeAuthenticate(name: string, password: string): Buffer {
  return new ProtoWriter().bytes(1, name).bytes(2, password).finish();
}

/** WatchRequest{create_request} with progress notifications asked for. */
export function encodeWatchCreate(c: { key: Bytes; rangeEnd?: Bytes; startRevision: number }): Buffer {
  const create = new ProtoWriter()
    .bytes(1, c.key)
    .bytes(2, c.rangeEnd ?? '')
    .int(3, c.startRevision)
    .bool(4, true)
    .finish();
  return new ProtoWriter().bytes(1, create, true).finish();
}

/** WatchRequest{progress_request}: etcd answers a synced watch with its current revision. */
export const watchProgressRequest: Buffer = new ProtoWriter().bytes(3, Buffer.alloc(0), true).finish();

/** The revision in a response's header (field 1 of every response). */
function headerRevision(buf: Buffer): number {
  const r = new ProtoReader(buf);
  while (r.next()) if (r.field === 3) return r.int();
  return 0;
}

export function decodeKeyValue(buf: Buffer): KeyValue {
  const r = new ProtoReader(buf);
  let key = '';
  let value = '';
  let createRevision = 0;
  let modRevision = 0;
  let version = 0;
  let lease = '0';
  while (r.next()) {
    switch (r.field) {
      case 1: key = r.text(); break;
      case 2: createRevision = r.int(); break;
      case 3: modRevision = r.int(); break;
      case 4: version = r.int(); break;
      case 5: value = r.text(); break;
      case 6: lease = r.id(); break;
    }
  }
  return { key, value, modRevision, createRevision, version, lease };
}

/** Any response of which only the header's revision matters (Put, DeleteRange, Compact, ...). */
export function decodeRevision(buf: Buffer): number {
  const r = new ProtoReader(buf);
  while (r.next()) if (r.field === 1) return headerRevision(r.bytes());
  return 0;
}

export function decodeRange(buf: Buffer): { revision: number; kvs: KeyValue[]; more: boolean } {
  const r = new ProtoReader(buf);
  let revision = 0;
  const kvs: KeyValue[] = [];
  let more = false;
  while (r.next()) {
    if (r.field === 1) revision = headerRevision(r.bytes());
    else if (r.field === 2) kvs.push(decodeKeyValue(r.bytes()));
    else if (r.field === 3) more = r.bool();
  }
  return { revision, kvs, more };
}

export function decodeTxn(buf: Buffer): { revision: number; succeeded: boolean } {
  const r = new ProtoReader(buf);
  let revision = 0;
  let succeeded = false;
  while (r.next()) {
    if (r.field === 1) revision = headerRevision(r.bytes());
    else if (r.field === 2) succeeded = r.bool();
  }
  return { revision, succeeded };
}

/** LeaseGrantResponse: ID 2, TTL 3, error 4. */
export function decodeLeaseGrant(buf: Buffer): { id: string; ttl: number; error: string } {
  const r = new ProtoReader(buf);
  let id = '0';
  let ttl = 0;
  let error = '';
  while (r.next()) {
    if (r.field === 2) id = r.id();
    else if (r.field === 3) ttl = r.int();
    else if (r.field === 4) error = r.text();
  }
  return { id, ttl, error };
}

/** LeaseTimeToLiveResponse's TTL (field 3): -1 for a lease that no longer exists. */
export function decodeTimeToLive(buf: Buffer): number {
  const r = new ProtoReader(buf);
  let ttl = 0;
  while (r.next()) if (r.field === 3) ttl = r.int();
  return ttl;
}

export function decodeToken(buf: Buffer): string {
  const r = new ProtoReader(buf);
  while (r.next()) if (r.field === 2) return r.text();
  return '';
}

export interface WatchResponse {
  readonly revision: number;
  readonly canceled: boolean;
  readonly compactRevision: number;
  readonly cancelReason: string;
  readonly events: WatchEvent[];
}

export function decodeWatchResponse(buf: Buffer): WatchResponse {
  const r = new ProtoReader(buf);
  let revision = 0;
  let canceled = false;
  let compactRevision = 0;
  let cancelReason = '';
  const events: WatchEvent[] = [];
  while (r.next()) {
    switch (r.field) {
      case 1: revision = headerRevision(r.bytes()); break;
      case 4: canceled = r.bool(); break;
      case 5: compactRevision = r.int(); break;
      case 6: cancelReason = r.text(); break;
      case 11: events.push(decodeEvent(r.bytes())); break;
    }
  }
  return { revision, canceled, compactRevision, cancelReason, events };
}

function decodeEvent(buf: Buffer): WatchEvent {
  const r = new ProtoReader(buf);
  let type: 'PUT' | 'DELETE' = 'PUT';
  let kv: KeyValue | undefined;
  while (r.next()) {
    if (r.field === 1) type = r.int() === 1 ? 'DELETE' : 'PUT';
    else if (r.field === 2) kv = decodeKeyValue(r.bytes());
  }
  if (!kv) throw new WeftError(ErrorCodes.PROTOCOL, 'etcd sent a watch event without its key-value');
  return { type, kv };
}
