/**
 * What the udp backend must know to forward without the registry: its socket's address and port,
 * the TUN's MTU and address, and the last forwarding table. The kernel keeps vxlan's and host-gw's
 * state across an agent restart; udp's table lives in the agent, so an agent restarted while the
 * registry is away would forward nothing until it returns. The table is written here (next to the
 * subnet file) each time it changes, and read at start. The file is input like any other: a value
 * that does not decode is no snapshot.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { writeFileAtomically } from '../../subnet/atomic-file.js';
import { type Cidr, formatCidr, tryParseCidr } from '../../ip/cidr.js';
import { type IpAddr, formatIp, tryParseIp } from '../../ip/ip.js';
import type { TunnelSpec } from './tunnel-kind.js';

export interface UdpSnapshot {
  readonly bind: IpAddr;
  readonly port: number;
  readonly mtu: number;
  /** Source of the ICMP errors the packet path writes into the TUN: the node's subnet address. */
  readonly tunAddr: IpAddr;
  readonly tunnels: readonly TunnelSpec[];
}

/** A table of 65536 peers is 3.5 MB of JSON; anything larger is not ours. */
const maxBytes = 8 * 1024 * 1024;

export function encodeSnapshot(s: UdpSnapshot): string {
  return JSON.stringify({ version: 1, bind: formatIp(s.bind), port: s.port, mtu: s.mtu, tunAddr: formatIp(s.tunAddr), tunnels: s.tunnels.map((t) => [formatCidr(t.dst), formatIp(t.endpoint)]) });
}

/** The snapshot, or undefined when the text is not one (wrong version, a field out of range, a bad entry). */
export function decodeSnapshot(text: string): UdpSnapshot | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const o = raw as Record<string, unknown>;
  const v4 = (v: unknown): IpAddr | undefined => {
    const ip = typeof v === 'string' ? tryParseIp(v) : undefined;
    return ip?.family === 4 ? ip : undefined;
  };
  const bind = v4(o['bind']);
  const tunAddr = v4(o['tunAddr']);
  const port = o['port'];
  const mtu = o['mtu'];
  if (o['version'] !== 1 || !bind || !tunAddr || !Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535) return undefined;
  if (!Number.isInteger(mtu) || (mtu as number) < 68 || (mtu as number) > 65535 || !Array.isArray(o['tunnels'])) return undefined;
  const tunnels: TunnelSpec[] = [];
  for (const entry of o['tunnels'] as unknown[]) {
    if (!Array.isArray(entry) || entry.length !== 2) return undefined;
    const dst: Cidr | undefined = typeof entry[0] === 'string' ? tryParseCidr(entry[0], 4) : undefined;
    const endpoint = v4(entry[1]);
    if (!dst || !endpoint) return undefined;
    tunnels.push({ dst, endpoint });
  }
  return { bind, port: port as number, mtu: mtu as number, tunAddr, tunnels };
}

export async function readSnapshot(path: string): Promise<UdpSnapshot | undefined> {
  try {
    const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const info = await fh.stat();
      if (!info.isFile() || info.size > maxBytes) return undefined;
      return decodeSnapshot(await fh.readFile('utf8'));
    } finally {
      await fh.close();
    }
  } catch {
    return undefined;
  }
}

/** Written whole or not at all, as subnet.env is. */
export async function writeSnapshot(path: string, s: UdpSnapshot): Promise<void> {
  await writeFileAtomically(path, encodeSnapshot(s), 0o600);
}

/**
 * Keeps the file at the latest table given, one write at a time: two writes in flight rename in
 * whichever order their syncs end, and the older table could stay on disk until the next change
 * (an agent restarted without the registry would then miss a peer). A table given while one is
 * written replaces any still waiting.
 */
export class SnapshotWriter {
  readonly #write: (s: UdpSnapshot) => Promise<void>;
  readonly #done: (err: unknown) => void;
  #next: UdpSnapshot | undefined;
  #writing: Promise<void> | undefined;

  /** `done` hears of each write: undefined when it is on disk, else why not. */
  constructor(options: { path: string; done: (err: unknown) => void; write?: (path: string, s: UdpSnapshot) => Promise<void> }) {
    const write = options.write ?? writeSnapshot;
    this.#write = (s) => write(options.path, s);
    this.#done = options.done;
  }

  save(s: UdpSnapshot): void {
    this.#next = s;
    // Begun from a resolved promise, the drain never ends before `#writing` holds it.
    this.#writing ??= Promise.resolve().then(() => this.#drain());
  }

  /**
   * Resolves once every table given so far has been written, or has failed: true; false when
   * `withinMs` ran out first (a write stuck on its disk must not hold an agent that stops).
   */
  async settled(withinMs = Infinity): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => {
      if (Number.isFinite(withinMs)) timer = setTimeout(() => resolve(false), withinMs);
    });
    try {
      while (this.#writing) if ((await Promise.race([this.#writing, late])) === false) return false;
      return true;
    } finally {
      clearTimeout(timer);
    }
  }

  async #drain(): Promise<void> {
    try {
      for (let s = this.#next; s; s = this.#next) {
        this.#next = undefined;
        let failure: unknown;
        try {
          await this.#write(s);
        } catch (err) {
          failure = err ?? new Error('the write failed');
        }
        this.#done(failure);
      }
    } finally {
      this.#writing = undefined;
    }
  }
}
