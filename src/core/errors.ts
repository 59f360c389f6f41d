/**
 * One catalogue of error codes. Callers match on `code`, never on message text, and whether a
 * failure is worth waiting out is decided here, once, from the code (`isRetriable`).
 *
 * | code                        | meaning                                                         | retriable |
 * |-----------------------------|-----------------------------------------------------------------|-----------|
 * | WEFT_ERR_CONFIG             | invalid input: net-conf JSON, flags, a subnet file               | no        |
 * | WEFT_ERR_CONFIG_NOT_FOUND   | `<prefix>/config` is absent from etcd                           | yes       |
 * | WEFT_ERR_LEASE_DECODE       | a registry entry (key or value) is not a valid flannel lease    | no        |
 * | WEFT_ERR_OUT_OF_SUBNETS     | no free subnet between SubnetMin and SubnetMax                  | no        |
 * | WEFT_ERR_SUBNET_TAKEN       | an atomic create lost: the key exists already                   | yes       |
 * | WEFT_ERR_LEASE_CHANGED      | a guarded update lost: the key changed or vanished meanwhile    | yes       |
 * | WEFT_ERR_COMPACTED          | a watch or list asked for a revision the registry no longer has | yes       |
 * |                             | (etcd compaction; Kubernetes 410 Gone / Expired)                |           |
 * | WEFT_ERR_ETCD               | etcd answered with an error                                     | yes       |
 * | WEFT_ERR_ETCD_DENIED        | etcd refused the client's credentials or rights (a role can be  | yes       |
 * |                             | granted while the agent waits)                                  |           |
 * | WEFT_ERR_KUBE_API           | the Kubernetes API answered with an error status                | yes       |
 * | WEFT_ERR_KUBE_INVALID       | the Kubernetes API refused a request as invalid (400, 422)      | no        |
 * | WEFT_ERR_PROTOCOL           | a registry's answer is malformed or over its size limit         | yes       |
 * | WEFT_ERR_UNAVAILABLE        | the registry could not be reached, or its answer broke off      | yes       |
 * | WEFT_ERR_MAX_RETRIES        | lease acquisition kept losing races                             | no        |
 * | WEFT_ERR_KERNEL             | the kernel refused a request or did not answer (`errno` set)    | yes       |
 * | WEFT_ERR_COMMAND            | a rule tool (iptables-restore, nft) failed or hung              | yes       |
 * | WEFT_ERR_INTERNAL           | weft broke one of its own invariants (a bug)                    | no        |
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
  ETCD_DENIED: 'WEFT_ERR_ETCD_DENIED',
  KUBE_API: 'WEFT_ERR_KUBE_API',
  KUBE_INVALID: 'WEFT_ERR_KUBE_INVALID',
  PROTOCOL: 'WEFT_ERR_PROTOCOL',
  UNAVAILABLE: 'WEFT_ERR_UNAVAILABLE',
  MAX_RETRIES: 'WEFT_ERR_MAX_RETRIES',
  KERNEL: 'WEFT_ERR_KERNEL',
  COMMAND: 'WEFT_ERR_COMMAND',
  INTERNAL: 'WEFT_ERR_INTERNAL',
} as const;

export type WeftErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** The failures that a later attempt may not meet: the registry, the kernel or a tool is having a bad moment. */
const retriableCodes: ReadonlySet<WeftErrorCode> = new Set([
  ErrorCodes.CONFIG_NOT_FOUND,
  ErrorCodes.SUBNET_TAKEN,
  ErrorCodes.LEASE_CHANGED,
  ErrorCodes.COMPACTED,
  ErrorCodes.ETCD,
  ErrorCodes.ETCD_DENIED,
  ErrorCodes.KUBE_API,
  ErrorCodes.PROTOCOL,
  ErrorCodes.UNAVAILABLE,
  ErrorCodes.KERNEL,
  ErrorCodes.COMMAND,
]);

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

/**
 * Whether waiting and trying again may succeed, from the error's code alone: false for bad input,
 * for a bug, and for anything that is not a WeftError (an unexpected TypeError is a bug too).
 */
export function isRetriable(err: unknown): boolean {
  return err instanceof WeftError && retriableCodes.has(err.code);
}

/** The pause a server asked for (Kubernetes' Retry-After), when the error carries one. */
export function retryAfterMs(err: unknown): number | undefined {
  const ms = (err as { retryAfterMs?: unknown } | null)?.retryAfterMs;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

export function isAbortError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError');
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
