/**
 * One catalogue of error codes. Callers match on `code`, never on message text.
 *
 * | code                        | meaning                                                         |
 * |-----------------------------|-----------------------------------------------------------------|
 * | WEFT_ERR_CONFIG             | invalid input: net-conf JSON, flags, a subnet file               |
 * | WEFT_ERR_CONFIG_NOT_FOUND   | `<prefix>/config` is absent from etcd                           |
 * | WEFT_ERR_LEASE_DECODE       | a registry entry (key or value) is not a valid flannel lease    |
 * | WEFT_ERR_OUT_OF_SUBNETS     | no free subnet between SubnetMin and SubnetMax                  |
 * | WEFT_ERR_SUBNET_TAKEN       | an atomic create lost: the key exists already                   |
 * | WEFT_ERR_LEASE_CHANGED      | a guarded update lost: the key changed or vanished meanwhile    |
 * | WEFT_ERR_COMPACTED          | a watch or list asked for a revision the registry no longer has |
 * |                             | (etcd compaction; Kubernetes 410 Gone / Expired)                |
 * | WEFT_ERR_ETCD               | etcd answered with an error                                     |
 * | WEFT_ERR_KUBE_API           | the Kubernetes API answered with an error status                |
 * | WEFT_ERR_PROTOCOL           | a registry's answer is malformed or over its size limit         |
 * | WEFT_ERR_UNAVAILABLE        | the registry could not be reached, or its answer broke off      |
 * | WEFT_ERR_MAX_RETRIES        | lease acquisition kept losing races                             |
 */
export const ErrorCodes = {
  CONFIG: 'WEFT_ERR_CONFIG',
  CONFIG_NOT_FOUND: 'WEFT_ERR_CONFIG_NOT_FOUND',
  LEASE_DECODE: 'WEFT_ERR_LEASE_DECODE',
  OUT_OF_SUBNETS: 'WEFT_ERR_OUT_OF_SUBNETS',
  SUBNET_TAKEN: 'WEFT_ERR_SUBNET_TAKEN',
  LEASE_CHANGED: 'WEFT_ERR_LEASE_CHANGED',
  COMPACTED: 'WEFT_ERR_COMPACTED',
  ETCD: 'WEFT_ERR_ETCD',
  KUBE_API: 'WEFT_ERR_KUBE_API',
  PROTOCOL: 'WEFT_ERR_PROTOCOL',
  UNAVAILABLE: 'WEFT_ERR_UNAVAILABLE',
  MAX_RETRIES: 'WEFT_ERR_MAX_RETRIES',
} as const;

export type WeftErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];


export class WeftError extends Error {
  readonly code: WeftErrorCode;

  constructor(code: WeftErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'WeftError';
    this.code = code;
  }
}

export function isWeftError(err: unknown, code?: WeftErrorCode): err is WeftError {
  return err instanceof WeftError && (code === undefined || err.code === code);
}


export function isAbortError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError');
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
