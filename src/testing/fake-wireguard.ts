/** An in-memory WireGuard port: devices with a key, a port and peers, for unit tests of decisions. */
import { x25519PublicKey } from '../core/x25519.js';
import { cidrEquals } from '../ip/cidr.js';
import { KernelError } from '../netlink/netlink.js';
import { type WgChange, type WgDevice, type WgPeerState, type WireGuardPort, isRemoval } from '../netlink/wireguard.js';

interface FakeDevice {
  listenPort: number;
  privateKey?: string;
  peers: WgPeerState[];
}

export class FakeWireGuard implements WireGuardPort {
  readonly devices = new Map<string, FakeDevice>();
  /** Changes applied, in order, for tests that count writes. */
  readonly changes: Array<{ device: string; change: WgChange }> = [];
  readonly #exists: ((name: string) => boolean) | undefined;
  closed = false;

  /**
   * `exists`: whether the kernel has a WireGuard link of that name (a FakeNetlink's), as the
   * kernel's devices come and go with their links; without it, devices are made with add().
   */
  constructor(exists?: (name: string) => boolean) {
    this.#exists = exists;
  }

  #get(name: string): FakeDevice | undefined {
    if (!this.#exists) return this.devices.get(name);
    if (!this.#exists(name)) {
      this.devices.delete(name);
      return undefined;
    }
    if (!this.devices.has(name)) this.add(name);
    return this.devices.get(name);
  }

  close(): void {
    this.closed = true;
  }

  add(name: string, listenPort = 0): void {
    this.devices.set(name, { listenPort, peers: [] });
  }

  async device(name: string): Promise<WgDevice | undefined> {
    const d = this.#get(name);
    if (!d) return undefined;
    return { listenPort: d.listenPort, ...(d.privateKey ? { publicKey: x25519PublicKey(d.privateKey) } : {}), peers: d.peers.map((p) => ({ ...p })) };
  }

  async configure(name: string, change: WgChange): Promise<void> {
    const d = this.#get(name);
    if (!d) throw new KernelError(`configure ${name}`, 'ENODEV');
    this.changes.push({ device: name, change });
    if (change.privateKey !== undefined) d.privateKey = change.privateKey;
    if (change.listenPort !== undefined) d.listenPort = change.listenPort;
    if (change.replacePeers) d.peers = [];
    for (const p of change.peers ?? []) {
      d.peers = d.peers.filter((q) => q.publicKey !== p.publicKey);
      if (isRemoval(p)) continue;
      // Allowed IPs are unique per device: a peer given one takes it from any other.
      for (const q of d.peers) (q as { allowedIps: WgPeerState['allowedIps'] }).allowedIps = q.allowedIps.filter((c) => !p.allowedIps.some((a) => cidrEquals(a, c)));
      d.peers.push({ ...p, rxBytes: 0, txBytes: 0 });
    }
  }
}
