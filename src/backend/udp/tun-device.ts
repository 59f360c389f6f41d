/**
 * The udp backend's TUN device, `flannel0` (spec §7.4): this node's subnet address as /32, MTU =
 * underlay − 28, up. Unlike flannel's, the device is persistent: it outlives the agent, so that a
 * restart finds it with its address and route and attaches to it again (a packet routed to it
 * meanwhile is dropped by the kernel; one that arrives while an fd is attached waits in its queue).
 * Deleted by hand, it is made again.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { FdHandover } from '../../core/handover.js';
import type { Cidr } from '../../ip/cidr.js';
import { KernelError, type Netlink } from '../../netlink/netlink.js';
import { ensureSubnetAddress, hasSubnetAddress } from '../device-address.js';
import type { UdpTunAddon } from './udp-addon.js';

/** flannel asks the kernel for `flannel%d`, which is flannel0 on any node that runs one agent. */
export const tunName = 'flannel0';
const handoverName = 'udp-tun';

export interface TunDeviceOptions {
  readonly addon: UdpTunAddon;
  readonly netlink: Netlink;
  readonly log: Logger;
  readonly mtu: number;
  /** The pod network: other addresses of it on the device are removed. */
  readonly network: Cidr;
  readonly handover?: FdHandover;
}

export class TunDevice {
  readonly name = tunName;
  readonly #o: TunDeviceOptions;
  #fd: number | undefined;
  #index: number | undefined;
  #warned = false;

  constructor(options: TunDeviceOptions) {
    this.#o = options;
  }

  get fd(): number {
    if (this.#fd === undefined) throw new WeftError(ErrorCodes.INTERNAL, 'the TUN device is not open');
    return this.#fd;
  }

  get index(): number | undefined {
    return this.#index;
  }

  /** Takes the fd the previous agent handed over, or opens (creating if need be) the device. */
  async open(): Promise<void> {
    const { addon, netlink: nl, log, mtu, handover } = this.#o;
    const inherited = handover?.take(handoverName);
    if (inherited !== undefined && addon.describeFd(inherited).tun === this.name) {
      addon.keepOnExec(inherited, false);
      this.#fd = inherited;
      log.info({ device: this.name }, 'TUN device taken over from the previous agent');
    } else {
      if (inherited !== undefined) {
        log.warn({ fd: inherited }, `the fd handed over as ${handoverName} is not the TUN device ${this.name}; opening the device instead`);
        addon.closeFd(inherited);
      }
      const existed = (await nl.linkByName(this.name)) !== undefined;
      this.#fd = addon.openTun(this.name);
      log.info({ device: this.name, mtu }, existed ? 'TUN device found and attached' : 'TUN device created');
    }
    const link = await nl.linkByName(this.name);
    if (!link) throw new KernelError(`the TUN device ${this.name} vanished as it was opened`, 'ENODEV');
    this.#index = link.index;
    if (link.mtu !== mtu) await nl.setLink(link.index, { mtu });
  }

  /** Gives the device this node's subnet address and brings it up. */
  async configure(subnet: Cidr | undefined): Promise<void> {
    const nl = this.#o.netlink;
    const index = this.#index!;
    if (subnet) await ensureSubnetAddress(nl, index, 4, { ip: subnet.ip, prefix: 32 }, this.#o.network);
    // The ICMP errors the forwarder writes back come from the TUN's own address, as flannel's do;
    // without this the kernel drops them as martians and a pod never learns the net is unreachable.
    if (!(await nl.acceptLocalSource(this.name)) && !this.#warned) {
      this.#warned = true;
      this.#o.log.warn({ device: this.name }, 'cannot set accept_local to 1 (read-only /proc/sys): pods get no ICMP net unreachable for subnets without a lease');
    }
    await nl.setLink(index, { up: true });
  }

  /** Puts back what was taken from the device, or the device itself; true when it was made anew (a new fd). */
  async repair(subnet: Cidr | undefined): Promise<boolean> {
    const nl = this.#o.netlink;
    const link = await nl.linkByName(this.name);
    if (link && link.index === this.#index) {
      const addressed = !subnet || (await hasSubnetAddress(nl, link.index, 4, { ip: subnet.ip, prefix: 32 }));
      if (!link.up || !addressed || link.mtu !== this.#o.mtu) {
        if (link.mtu !== this.#o.mtu) await nl.setLink(link.index, { mtu: this.#o.mtu });
        await this.configure(subnet);
      }
      return false;
    }
    this.#o.log.warn({ device: this.name }, 'TUN device gone; making it again');
    this.close();
    await this.open();
    await this.configure(subnet);
    return true;
  }

  /** Hands the fd to the agent that replaces this one, should it re-execute itself. */
  handOver(): void {
    if (this.#fd === undefined || !this.#o.handover) return;
    this.#o.addon.keepOnExec(this.#fd, true);
    this.#o.handover.pass(handoverName, this.#fd);
  }

  close(): void {
    if (this.#fd !== undefined) this.#o.addon.closeFd(this.#fd);
    this.#fd = undefined;
  }
}
