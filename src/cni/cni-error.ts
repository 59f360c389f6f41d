/**
 * CNI errors: `{"cniVersion","code","msg","details"}` on stdout and exit status 1. Codes from the
 * CNI specification; a delegate's own error passes through with its code.
 */
export const CniCodes = {
  INCOMPATIBLE_VERSION: 1,
  UNSUPPORTED_FIELD: 2,
  UNKNOWN_CONTAINER: 3,
  INVALID_ENV: 4,
  IO_FAILURE: 5,
  DECODE_FAILURE: 6,
  INVALID_CONFIG: 7,
  TRY_AGAIN_LATER: 11,
  NOT_AVAILABLE: 50,
  LIMITED_CONNECTIVITY: 51,
  /** flannel's code for its own failures, kept where nothing in the spec fits. */
  FLANNEL: 999,
} as const;

export class CniError extends Error {
  readonly code: number;
  readonly details: string | undefined;

  constructor(code: number, msg: string, details?: string) {
    super(msg);
    this.name = 'CniError';
    this.code = code;
    this.details = details;
  }

  toJson(cniVersion: string): string {
    return JSON.stringify({ cniVersion, code: this.code, msg: this.message, ...(this.details ? { details: this.details } : {}) }, null, 4);
  }
}
