import type { FdHandover } from '../core/handover.js';

/** What a command gets from the process: output streams and the shutdown signal. */
export interface Io {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly signal: AbortSignal;
  /** File descriptors the agent received from, and passes to, the agent of a graceful restart. */
  readonly handover?: FdHandover;
}
