/**
 * WireGuard where the kernel has none: weft's own data path (native/wireguard, wg-addon.ts), one
 * per device. The device is a persistent TUN named as flannel names its devices, so its address
 * and route outlive the agent as the kernel's device would; the protocol state (keys, sessions,
 * peers) lives in the addon and is configured through the same port as the kernel's.
 */
import { ErrorCodes, WeftError, errorMessage } from '../../core/errors.js';
import type { FdHandover } from '../../core/handover.js';
import type { Logger } from '../../core/log.js';
import { KernelError, type Netlink, errnoOf, linkKind } from '../../netlink/netlink.js';
import { checkResponse, formatSet, parseGet } from '../../netlink/wg-uapi.js';
import type { WgChange, WgDevice, WireGuardPort } from '../../netlink/wireguard.js';
import type { WgDataPath, WgDeviceSpec } from './data-path.js';
import { UapiServer } from './uapi-server.js';
import { type WgDeviceHandle, type WireguardAddon, wgCounterNames, wgCountersOf } from './wg-addon.js';

interface Running {
  readonly tun: number;
  readonly udp: number;
  readonly handle: WgDeviceHandle;
  readonly index: number;
  readonly listenPort: number;
  readonly server?: UapiServer;
}

export class UserspacePath implements WgDataPath, WireGuardPort {
  readonly kind = 'userspace';
  readonly port: WireGuardPort = this;
  readonly #addon: WireguardAddon;
  readonly #nl: Netlink;
  readonly #log: Logger;
  readonly #devices = new Map<string, Running>();
  readonly #socketDir: string | undefined;
  readonly #listeners = new Set<() => void>();
  readonly #handover: FdHandover | undefined;

  /**
   * `socketDir`: where each device's UAPI socket goes (`wg` looks in /var/run/wireguard); undefined:
   * none. `handover`: a graceful restart hands each device's TUN, socket and sessions to the next
   * agent, and takes the previous agent's.
   */
  constructor(addon: WireguardAddon, netlink: Netlink, log: Logger, socketDir?: string, handover?: FdHandover) {
    this.#addon = addon;
    this.#nl = netlink;
    this.#log = log;
    this.#socketDir = socketDir;
    this.#handover = handover;
  }

  onOutsideChange(changed: () => void): () => void {
    this.#listeners.add(changed);
    return () => this.#listeners.delete(changed);
  }

  async ensure(name: string, spec: WgDeviceSpec): Promise<number> {
    const running = this.#devices.get(name);
    const link = await this.#nl.linkByName(name);
    if (running && link?.index === running.index && running.listenPort === spec.listenPort) {
      this.#configure(name, running, { privateKey: spec.privateKey });
      if (link.mtu !== spec.mtu) await this.#nl.setLink(link.index, { mtu: spec.mtu });
      return running.index;
    }
    if (running) this.#release(name, running);
    if (link && linkKind(link) !== 'tun') {
      // A kernel WireGuard device of this name (flanneld's, on a node whose kernel had one before):
      // weft's own path needs a TUN in its place.
      this.#log.warn({ device: name, kind: linkKind(link) }, 'replacing a device that is not a TUN with weft\'s WireGuard TUN');
      await this.#nl.deleteLink(link.index);
    }
    const inherited = this.#inherited(name, spec.listenPort);
    const tun = inherited.tun ?? this.#addon.openTun(name);
    let udp = inherited.udp;
    // The previous agent's state (keys among it): closed once, whatever happens below.
    let state = inherited.state;
    let handle: WgDeviceHandle | undefined;
    try {
      const made = await this.#nl.linkByName(name);
      if (!made) throw new KernelError(`the TUN device ${name} vanished as it was opened`, 'ENODEV');
      if (made.mtu !== spec.mtu) await this.#nl.setLink(made.index, { mtu: spec.mtu });
      try {
        udp ??= this.#addon.openUdp(spec.listenPort);
      } catch (err) {
        throw new WeftError(ErrorCodes.CONFIG, `cannot listen on UDP port ${spec.listenPort} for ${name}: ${errorMessage(err)} (is flanneld or another WireGuard on this node using it?)`, { cause: err });
      }
      handle = this.#addon.start(tun, udp, spec.mtu, spec.listenPort, state);
      if (state !== undefined) {
        const used = state;
        state = undefined;
        this.#addon.closeFd(used);
        const sessions = this.#addon.restoredPeers(handle);
        this.#log.info({ device: name, peers: sessions }, sessions >= 0 ? 'WireGuard device, socket and sessions taken over from the previous agent' : 'WireGuard device and socket taken over; the previous agent\'s sessions were not restored (another version\'s, or unreadable) and are made anew');
      }
      const server = this.#socketDir === undefined ? undefined : this.#server(name, handle);
      const dev = { tun, udp, handle, index: made.index, listenPort: spec.listenPort, ...(server ? { server } : {}) };
      this.#devices.set(name, dev);
      this.#configure(name, dev, { privateKey: spec.privateKey, listenPort: spec.listenPort });
      await server?.start().catch((err: unknown) => this.#log.warn({ err, socket: server.path }, `cannot serve the WireGuard UAPI socket (\`wg show ${name}\` will not work): ${errorMessage(err)}`));
      this.#log.info({ device: name, listenPort: spec.listenPort, mtu: spec.mtu, existed: link !== undefined }, 'WireGuard device up (weft\'s own data path)');
      return made.index;
    } catch (err) {
      const dev = this.#devices.get(name);
      if (dev) this.#release(name, dev);
      else {
        // A started device's threads use the fds: stopped before they are closed.
        if (handle) this.#addon.stop(handle);
        if (udp !== undefined) this.#addon.closeFd(udp);
        this.#addon.closeFd(tun);
      }
      if (state !== undefined) this.#addon.closeFd(state);
      throw err;
    }
  }

  async device(name: string): Promise<WgDevice | undefined> {
    const dev = this.#devices.get(name);
    return dev ? parseGet(this.#addon.uapi(dev.handle, 'get=1\n\n')) : undefined;
  }

  async configure(name: string, change: WgChange): Promise<void> {
    const dev = this.#devices.get(name);
    if (!dev) throw new KernelError(`configure the WireGuard device ${name}`, 'ENODEV');
    this.#configure(name, dev, change);
  }

  counters(): Readonly<Record<string, number>> {
    const sum: Record<string, number> = Object.fromEntries(wgCounterNames.map((n) => [n, 0]));
    for (const dev of this.#devices.values()) for (const [k, v] of Object.entries(wgCountersOf(this.#addon.counters(dev.handle)))) sum[k] = (sum[k] ?? 0) + v;
    return sum;
  }

  /** With a handover, each device's TUN, socket and state go to the next agent, open; else they close. */
  stop(): void {
    for (const [name, dev] of [...this.#devices]) this.#release(name, dev, this.#handover);
  }

  /** The previous agent's TUN, socket and state for this device, each only if it is what it should be. */
  #inherited(name: string, port: number): { tun?: number; udp?: number; state?: number } {
    const h = this.#handover;
    if (!h) return {};
    const out: { tun?: number; udp?: number; state?: number } = {};
    const [tun, udp, state] = [h.take(`wg-tun-${name}`), h.take(`wg-socket-${name}`), h.take(`wg-state-${name}`)];
    if (tun !== undefined && this.#addon.describeFd(tun).tun === name) out.tun = tun;
    else if (tun !== undefined) this.#addon.closeFd(tun);
    if (udp !== undefined && this.#addon.describeFd(udp).udpPort === port) out.udp = udp;
    else if (udp !== undefined) this.#addon.closeFd(udp);
    // Sessions only go on with the socket they were made on.
    if (state !== undefined && out.tun !== undefined && out.udp !== undefined) out.state = state;
    else if (state !== undefined) this.#addon.closeFd(state);
    for (const fd of [out.tun, out.udp, out.state]) if (fd !== undefined) this.#addon.keepOnExec(fd, false);
    return out;
  }

  #configure(name: string, dev: Running, change: WgChange): void {
    checkResponse(this.#addon.uapi(dev.handle, formatSet(change)), `configure the WireGuard device ${name}`);
  }

  #server(name: string, handle: WgDeviceHandle): UapiServer {
    const changed = (): void => {
      for (const l of this.#listeners) l();
    };
    return new UapiServer(this.#socketDir!, name, (request) => this.#addon.uapi(handle, request), changed, this.#log);
  }

  #release(name: string, dev: Running, handover?: FdHandover): void {
    this.#devices.delete(name);
    // The socket goes before the device: a request in flight must not reach a stopped one.
    void dev.server?.stop();
    if (handover) {
      const state = this.#addon.stop(dev.handle, true);
      for (const [what, fd] of [['tun', dev.tun], ['socket', dev.udp], ['state', state]] as const) {
        if (fd < 0) continue;
        this.#addon.keepOnExec(fd, true);
        handover.pass(`wg-${what}-${name}`, fd);
      }
      return;
    }
    this.#addon.stop(dev.handle);
    for (const fd of [dev.udp, dev.tun]) {
      try {
        this.#addon.closeFd(fd);
      } catch (err) {
        this.#log.warn({ device: name, errno: errnoOf(err) }, 'closing a WireGuard device\'s descriptor failed');
      }
    }
  }
}
