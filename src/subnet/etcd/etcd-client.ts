/**
 * What weft asks of etcd (the v3 API's KV, Watch and Lease calls it uses), as a port: the
 * registry depends on this, the gRPC client (etcd-grpc.ts) implements it.
 */
import { readFile } from 'node:fs/promises';
import { ErrorCodes, WeftError } from '../../core/errors.js';

export interface EtcdTls {
  readonly ca?: string;
  readonly cert: string;
  readonly key: string;
}

export interface KeyValue {
  readonly key: string;
  readonly value: string;
  readonly modRevision: number;
  /** The revision that created the key (unchanged by later writes until it is deleted). */
  readonly createRevision: number;
  readonly version: number;
  /** `'0'` for a key without an etcd lease (a reservation). */
  readonly lease: string;
}

export interface RangeResult {
  readonly revision: number;
  readonly kvs: readonly KeyValue[];
}

export type Compare =
  | { readonly key: string; readonly target: 'VERSION'; readonly version: number }
  | { readonly key: string; readonly target: 'MOD'; readonly modRevision: number };

export type TxnOp =
  | { readonly put: { readonly key: string; readonly value: string; readonly lease?: string } }
  | { readonly deleteRange: { readonly key: string } };

export interface TxnResult {
  readonly succeeded: boolean;
  readonly revision: number;
}

export interface WatchEvent {
  readonly type: 'PUT' | 'DELETE';
  readonly kv: KeyValue;
}

export interface WatchBatch {
  readonly revision: number;
  readonly events: readonly WatchEvent[];
}

export interface EtcdClient {
  /**
   * Reads `key`, or every key under the prefix. Large prefixes are read in pages of `pageSize`
   * at one pinned revision, so the result is one consistent snapshot without one huge response.
   */
  range(key: string, options: { prefix?: boolean; pageSize?: number; signal: AbortSignal }): Promise<RangeResult>;
  /**
   * The same read, a page at a time (each with the snapshot's revision): a reader that keeps
   * something smaller than the key-values lets each page go before the next arrives.
   */
  rangePages(key: string, options: { prefix?: boolean; pageSize?: number; signal: AbortSignal }): AsyncGenerator<RangeResult>;
  txn(compare: readonly Compare[], success: readonly TxnOp[], signal: AbortSignal): Promise<TxnResult>;
  put(key: string, value: string, signal: AbortSignal): Promise<number>;
  deleteRange(key: string, options: { prefix?: boolean; signal: AbortSignal }): Promise<number>;
  /** Grants an etcd lease; returns its ID and the TTL etcd actually gave. */
  leaseGrant(ttlSeconds: number, signal: AbortSignal): Promise<{ id: string; ttlSeconds: number }>;
  /** Seconds the lease has left, or undefined when it no longer exists. */
  leaseTimeToLive(id: string, signal: AbortSignal): Promise<number | undefined>;
  /** Revokes a lease; one that no longer exists counts as revoked. */
  leaseRevoke(id: string, signal: AbortSignal): Promise<void>;
  compact(revision: number, signal: AbortSignal): Promise<void>;
  /**
   * Watches `key` (or the prefix) from `startRevision`, yielding each response that carries
   * events, in order. Ends only by throwing: WEFT_ERR_COMPACTED when the start revision is gone,
   * WEFT_ERR_UNAVAILABLE when the stream breaks or the member loses its leader, or the abort reason.
   */
  watch(key: string, options: { prefix?: boolean; startRevision: number; signal: AbortSignal }): AsyncGenerator<WatchBatch>;
  /** When etcd last proved alive (an answer, watch data, an answered PING; ms since the epoch; 0: never). */
  lastAlive(): number;
  close(): void;
}

/** Smallest key greater than every key starting with `prefix` (etcd's range_end for a prefix). */
export function prefixRangeEnd(prefix: string): Buffer {
  const bytes = Buffer.from(prefix, 'utf8');
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i]! < 0xff) {
      const end = bytes.subarray(0, i + 1);
      end[i]! += 1;
      return end;
    }
  }
  return Buffer.from([0]);
}

/** Reads the PEM files named by flanneld's `--etcd-cafile/certfile/keyfile` flags. */
export async function loadEtcdTls(files: { caFile?: string; certFile: string; keyFile: string }): Promise<EtcdTls> {
  const read = async (path: string, flag: string): Promise<string> => {
    try {
      return await readFile(path, 'utf8');
    } catch (err) {
      throw new WeftError(ErrorCodes.CONFIG, `cannot read ${flag} ${path}: ${(err as Error).message}`, { cause: err });
    }
  };
  const [ca, cert, key] = await Promise.all([
    files.caFile ? read(files.caFile, '--etcd-cafile') : undefined,
    read(files.certFile, '--etcd-certfile'),
    read(files.keyFile, '--etcd-keyfile'),
  ]);
  return ca === undefined ? { cert, key } : { ca, cert, key };
}

/** The gRPC status code etcd attached to an error (14 unavailable, 16 unauthenticated, ...). */
export function grpcCode(err: unknown): number | undefined {
  const code = (err as { grpcCode?: unknown } | null)?.grpcCode;
  return typeof code === 'number' ? code : undefined;
}
