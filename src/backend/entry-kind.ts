/**
 * The reconciler's model of the kernel: a list of entry kinds, each an adapter that knows how to
 * name, list, compare, write and remove one kind of entry and how to read the kernel's
 * notifications about it. The reconciler knows no kind by name; a backend hands it its kinds in
 * write order (vxlan: neighbour, fdb, route; host-gw: route; udp: route and its forwarding table),
 * so a new kind of state (a WireGuard peer) is one more adapter, not an edit of the reconciler.
 */
import type { Family } from '../ip/ip.js';
import type { NetlinkChange } from '../netlink/netlink.js';
import type { FamilyRefusal } from './peer-checks.js';

/**
 * One kind of entry the reconciler keeps equal to the desired state. `T` is what a program wants
 * and what `list` returns (a listing may carry more than the program asked for): a record, never
 * an array (a kept program holds a lone entry as itself, kept-program.ts).
 *
 * Contract: `put` is idempotent (a replace); `remove` of an entry that is gone resolves; both
 * reject with a coded error (WEFT_ERR_KERNEL) that the reconciler logs once and retries with a
 * backoff. `list` returns only entries in this backend's scope: everything it returns that no
 * program wants is removed.
 */
export interface EntryKind<T extends object = object> {
  /** For logs and the `kind` label of `weft_kernel_writes_total` and `weft_repairs_total`. */
  readonly name: string;
  /** Entries with one key are one entry: two programs wanting one key share it. */
  key(entry: T): string;
  /**
   * The entries in the kernel to compare with the desired state: those it manages, and those under
   * a key a program wants (`wanted`), which a pass then leaves alone when they match.
   */
  list(signal: AbortSignal, wanted?: (key: string) => T | undefined): Promise<Iterable<T>>;
  matches(want: T, have: T): boolean;
  put(entry: T): Promise<void>;
  remove(entry: T): Promise<void>;
  /**
   * Whether a kernel notification may leave the kernel different from the desired state, given
   * the entry wanted under each key. The echo of the reconciler's own writes is not: without this
   * test, programming 1000 peers would be followed by a full pass over every entry that changes
   * nothing. False for notifications about other kinds.
   */
  departs(change: NetlinkChange, want: (key: string) => T | undefined): boolean;
  /**
   * Set when two leases must not want one key in two forms: vxlan's FDB, where a VtepMAC sent to
   * a second address takes the first node's traffic. The lease that wanted it first keeps it; a
   * later one is refused whole with this code (and a text naming what it claims). Unset: a shared
   * key takes the form the program added last wants.
   */
  readonly exclusive?: { readonly code: string; describe(entry: T): string };
  /** Called after every pass that may have written entries of this kind: a kind whose "kernel" takes its entries whole (udp's table) writes them here. */
  flush?(): void;
  /**
   * For a kind whose "kernel" reports changes made outside the reconciler by other means than
   * netlink (weft's own WireGuard device, configured by hand through its UAPI socket): `changed`
   * is called on each, and makes a full pass. Returns the unsubscribe.
   */
  onOutsideChange?(changed: () => void): () => void;
}

/** The entries a program wants, by kind name. A kind the backend did not declare is a bug. */
export type Program = { readonly [kind: string]: readonly object[] | undefined };

/** What the reconciler keeps of a peer lease it programs. */
export interface PeerProgram {
  readonly entries: Program;
  /** The families of the lease that this program carries (a dual-stack lease may be half usable). */
  readonly families: readonly Family[];
  /** Why a family of the lease was left out. */
  readonly refused?: string;
  /** The families left out, each with the code of its reason (for metrics). */
  readonly refusedFamilies?: readonly FamilyRefusal[];
}

/** A device whose neighbours and FDB entries a backend manages entirely, e.g. `flannel.1`. */
export interface ManagedDevice {
  readonly index: number;
  readonly family: Family;
}
