/**
 * What the CNI plugin's logic needs from the host it runs for: its files (saved state, subnet.env)
 * and its delegates. Two implementations share the one logic (flannel-cni.ts): local-host.ts, when
 * the logic runs in the plugin's own process (the Node plugin), and remote-host.ts, when it runs in
 * the agent for the host's small static plugin (native/cni-plugin), which does each step on the
 * host and answers. Paths are the host's. Failures carry the errno name (`code`), as Node's do.
 */

/** A failed file operation: `code` is the errno name (ENOENT, EACCES, ...). */
export class HostError extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = 'HostError';
    this.code = code;
  }
}

export interface HostStat {
  readonly kind: 'file' | 'dir' | 'other';
  /** Permission bits and the file type, as st_mode. */
  readonly mode: number;
  readonly size: number;
}

/** How a delegate ended: its exit, or why it was not let finish. */
export type ExecOutcome =
  | { readonly status: 'exited'; readonly code: number; readonly stdout: string; readonly stderr: string }
  /** Killed with its process group: past its deadline, printing too much, or the plugin stopped. */
  | { readonly status: 'timeout' | 'overflow' | 'stopped' }
  /** It could not be started (the message names why, as Node's spawn error does). */
  | { readonly status: 'unstartable'; readonly message: string };

export interface ExecRequest {
  readonly path: string;
  /** The delegate's whole environment (CNI_COMMAND included). */
  readonly env: Readonly<Record<string, string>>;
  readonly stdin: string;
  readonly timeoutMs: number;
  /** Output past this many bytes (stdout and stderr together) kills it. */
  readonly maxOutput: number;
}

export interface CniHost {
  /** The entry itself (a symlink is not followed); undefined when there is none. */
  lstat(path: string): Promise<HostStat | undefined>;
  /** A regular file's text, opened without blocking on a FIFO; rejects what is not one (EINVAL) or is past `maxBytes` (EFBIG). */
  readFile(path: string, maxBytes: number): Promise<string>;
  /** Makes the directory and its missing parents. */
  mkdirp(path: string, mode: number): Promise<void>;
  /** Writes under a new hidden name beside `path` (never through a symlink), syncs, renames over it. */
  writeAtomically(path: string, text: string, mode: number): Promise<void>;
  /** Removes a file; one that is not there is no failure. */
  remove(path: string): Promise<void>;
  /** Removes an empty directory; false when it could not. */
  rmdir(path: string): Promise<boolean>;
  /** The names in a directory; none when it or a parent is missing or not a directory. */
  readdir(path: string): Promise<string[]>;
  /** True when `path` is a file this process may execute. */
  executable(path: string): Promise<boolean>;
  /** Runs a delegate in a process group of its own, with its stdin, to its end or its limits. */
  exec(request: ExecRequest): Promise<ExecOutcome>;
}
