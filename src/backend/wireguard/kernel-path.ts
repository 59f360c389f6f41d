/**
 * WireGuard in the kernel, where it has the module: devices of kind `wireguard` made over
 * rtnetlink and configured through the WireGuard port over generic netlink (wg-netlink.ts), as
 * flanneld does. Unlike flanneld, an existing device is kept (flanneld deletes and makes it on every
 * start, which drops every session and cuts traffic): its key and port are set again, and the
 * reconciler brings its peers in line with the leases.
 */
import type { Logger } from '../../core/log.js';
import { KernelError, type Netlink, errnoOf, linkKind } from '../../netlink/netlink.js';
import type { WireGuardPort } from '../../netlink/wireguard.js';
import type { WgDataPath, WgDeviceSpec } from './data-path.js';

export class KernelPath implements WgDataPath {
  readonly kind = 'kernel';
  readonly port: WireGuardPort;
  readonly #nl: Netlink;
  readonly #log: Logger;

  constructor(netlink: Netlink, port: WireGuardPort, log: Logger) {
    this.#nl = netlink;
    this.port = port;
    this.#log = log;
  }

  /**
   * Whether this kernel makes WireGuard devices: true when `name` is one already, or when one can
   * be made (then kept for ensure); false when the kernel does not know the kind (no module). A
   * device of another kind under that name (weft's own TUN from an earlier run) is left alone: the
   * question is asked with a device of another name, made and deleted at once.
   */
  static async available(netlink: Netlink, name: string, mtu: number): Promise<boolean> {
    const link = await netlink.linkByName(name);
    if (link && linkKind(link) === 'wireguard') return true;
    const probe = link ? `wgprobe${process.pid % 100_000}` : name;
    try {
      const made = await netlink.createLink(probe, { kind: 'wireguard' }, { mtu });
      if (probe !== name) await netlink.deleteLink(made.index);
      return true;
    } catch (err) {
      if (errnoOf(err) === 'EOPNOTSUPP') return false;
      throw err;
    }
  }

  async ensure(name: string, spec: WgDeviceSpec): Promise<number> {
    let link = await this.#nl.linkByName(name);
    if (link && linkKind(link) !== 'wireguard') {
      this.#log.warn({ device: name, kind: linkKind(link) }, 'replacing a device that is not a WireGuard one with the kernel\'s');
      await this.#nl.deleteLink(link.index);
      link = undefined;
    }
    if (!link) link = await this.#nl.createLink(name, { kind: 'wireguard' }, { mtu: spec.mtu });
    else if (link.mtu !== spec.mtu) await this.#nl.setLink(link.index, { mtu: spec.mtu });
    await this.port.configure(name, { privateKey: spec.privateKey, listenPort: spec.listenPort });
    const device = await this.port.device(name);
    if (!device) throw new KernelError(`the WireGuard device ${name} vanished as it was configured`, 'ENODEV');
    this.#log.info({ device: name, listenPort: spec.listenPort, mtu: spec.mtu }, 'WireGuard device up (the kernel\'s)');
    return link.index;
  }

  counters(): undefined {
    return undefined;
  }

  stop(): void {
    this.port.close?.();
  }
}
