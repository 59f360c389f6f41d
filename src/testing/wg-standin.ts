/**
 * A stand-in flannel node on WireGuard, for machines whose kernel has none (flanneld needs the
 * kernel's): Debian's `wireguard-go` and `wg` configured exactly as flanneld configures its
 * kernel device (spec wireguard.md §1.5-1.9, §2), and the lease flanneld writes. `wireguard-go`
 * serves its UAPI socket under /var/run/wireguard, one directory per mount namespace, so each
 * stand-in runs in a private mount namespace of its own and `wg` is run inside it.
 */
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { x25519PrivateKey, x25519PublicKey } from '../core/x25519.js';
import type { Cluster, ClusterNode } from './cluster.js';
import { nsExec, sh, spawnInNetns, stopProcess } from './netns.js';
import { waitUntil } from './wait.js';

export interface StandInOptions {
  /** The node's subnet, e.g. `198.18.200.0/24`. */
  readonly subnet: string;
  readonly network?: string;
  readonly listenPort?: number;
  /** flanneld v0.20.2 publishes `{"PublicKey":..}` alone; later ones add `"Port"`. */
  readonly publishPort?: boolean;
  readonly psk?: string;
  readonly keepaliveS?: number;
}

export class WgStandIn {
  readonly node: ClusterNode;
  readonly #cluster: Cluster;
  readonly #o: Required<Omit<StandInOptions, 'psk'>> & { psk?: string };
  #process: ChildProcess | undefined;
  privateKey = x25519PrivateKey();

  private constructor(cluster: Cluster, node: ClusterNode, options: StandInOptions) {
    this.#cluster = cluster;
    this.node = node;
    this.#o = { network: '198.18.0.0/16', listenPort: 51820, publishPort: true, keepaliveS: 0, ...options };
  }

  /** wireguard-go's pid (it replaced the shell that set up its mount namespace). */
  get pid(): number | undefined {
    return this.#process?.pid;
  }

  get publicKey(): string {
    return x25519PublicKey(this.privateKey);
  }

  get leaseKey(): string {
    return `/coreos.com/network/subnets/${this.#o.subnet.replace('/', '-')}`;
  }

  /** Starts the device, configures it as flanneld does, writes its lease and its subnet file. */
  static async start(cluster: Cluster, node: ClusterNode, options: StandInOptions): Promise<WgStandIn> {
    const s = new WgStandIn(cluster, node, options);
    const child = spawnInNetns(node.ns, 'unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mkdir -p /var/run/wireguard && mount -t tmpfs none /var/run/wireguard && exec wireguard-go -f flannel-wg']);
    s.#process = child;
    child.stderr?.resume();
    child.stdout?.resume();
    await waitUntil(`${node.name}'s wireguard-go serves its socket`, () => s.wg(['show', 'flannel-wg']).then(() => true, () => false), 10_000);
    await s.#setKey();
    const [ip] = s.#o.subnet.split('/') as [string];
    await nsExec(node.ns, 'ip', ['addr', 'add', `${ip}/32`, 'dev', 'flannel-wg']);
    await nsExec(node.ns, 'ip', ['link', 'set', 'flannel-wg', 'up']);
    await nsExec(node.ns, 'ip', ['route', 'replace', s.#o.network, 'dev', 'flannel-wg']);
    await s.writeLease();
    const octets = ip.split('.').map(Number);
    await writeFile(node.subnetFile, `FLANNEL_NETWORK=${s.#o.network}\nFLANNEL_SUBNET=${octets.slice(0, 3).join('.')}.${octets[3]! + 1}/${s.#o.subnet.split('/')[1]}\nFLANNEL_MTU=1420\nFLANNEL_IPMASQ=false\n`);
    return s;
  }

  /** `wg` inside the stand-in's mount and network namespaces. */
  wg(args: readonly string[]): Promise<string> {
    const pid = this.#process?.pid;
    if (pid === undefined) return Promise.reject(new Error('the stand-in is not running'));
    return sh('nsenter', ['--target', String(pid), '--mount', '--net', 'wg', ...args]);
  }

  async #setKey(): Promise<void> {
    const file = join(this.node.dir, 'standin.key');
    await writeFile(file, this.privateKey, { mode: 0o600 });
    await this.wg(['set', 'flannel-wg', 'private-key', file, 'listen-port', String(this.#o.listenPort)]);
  }

  /** The lease as flanneld writes it (field order included). */
  async writeLease(): Promise<void> {
    const data = this.#o.publishPort ? { PublicKey: this.publicKey, Port: this.#o.listenPort } : { PublicKey: this.publicKey };
    await this.#cluster.etcd('put', this.leaseKey, JSON.stringify({ PublicIP: this.node.ip, PublicIPv6: null, BackendType: 'wireguard', BackendData: data }));
  }

  /** One peer per wireguard lease, as flanneld's addPeer (it never removes the old ones). */
  async addPeers(): Promise<void> {
    for (const { key, value } of await this.#cluster.leases()) {
      if (key === this.leaseKey) continue;
      const attrs = JSON.parse(value) as { PublicIP: string; BackendType: string; BackendData?: { PublicKey: string; Port?: number } };
      if (attrs.BackendType !== 'wireguard' || !attrs.BackendData) continue;
      const subnet = key.split('/').pop()!.replace('-', '/');
      const args = ['set', 'flannel-wg', 'peer', attrs.BackendData.PublicKey, 'endpoint', `${attrs.PublicIP}:${attrs.BackendData.Port || this.#o.listenPort}`, 'allowed-ips', subnet, 'persistent-keepalive', String(this.#o.keepaliveS)];
      if (this.#o.psk) {
        const file = join(this.node.dir, 'standin.psk');
        await writeFile(file, this.#o.psk, { mode: 0o600 });
        args.push('preshared-key', file);
      }
      await this.wg(args);
    }
  }

  /** A new key (as after a reboot wiped /run/flannel/wgkey): the device takes it and the lease is rewritten. */
  async rekey(): Promise<void> {
    this.privateKey = x25519PrivateKey();
    await this.#setKey();
    await this.writeLease();
  }

  async stop(): Promise<void> {
    if (this.#process) await stopProcess(this.#process);
    this.#process = undefined;
  }
}
