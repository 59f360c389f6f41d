/**
 * The udp backend's forwarding table as an entry kind: its "kernel" is the native packet path,
 * which takes the table whole. Puts and removes change the table kept here; `flush`, after each
 * pass of the reconciler, hands the changed table over in one piece. Nobody but this agent writes
 * it, so no kernel notification departs from it.
 */
import { type Cidr, formatCidr } from '../../ip/cidr.js';
import { type IpAddr, ipEquals } from '../../ip/ip.js';
import type { EntryKind } from '../entry-kind.js';

/** Packets for `dst` go to `endpoint` in a datagram. */
export interface TunnelSpec {
  readonly dst: Cidr;
  readonly endpoint: IpAddr;
}

export class TunnelTable implements EntryKind<TunnelSpec> {
  readonly name = 'tunnel';
  readonly #entries = new Map<string, TunnelSpec>();
  readonly #apply: (tunnels: readonly TunnelSpec[]) => void;
  /** The first flush hands over the table even when it is empty: the packet path starts with it. */
  #dirty = true;

  constructor(apply: (tunnels: readonly TunnelSpec[]) => void) {
    this.#apply = apply;
  }

  key(t: TunnelSpec): string {
    return formatCidr(t.dst);
  }

  async list(): Promise<TunnelSpec[]> {
    return [...this.#entries.values()];
  }

  matches(want: TunnelSpec, have: TunnelSpec): boolean {
    return ipEquals(want.endpoint, have.endpoint);
  }

  async put(t: TunnelSpec): Promise<void> {
    this.#entries.set(this.key(t), t);
    this.#dirty = true;
  }

  async remove(t: TunnelSpec): Promise<void> {
    if (this.#entries.delete(this.key(t))) this.#dirty = true;
  }

  departs(): boolean {
    return false;
  }

  flush(): void {
    if (!this.#dirty) return;
    this.#dirty = false;
    this.#apply([...this.#entries.values()]);
  }
}
