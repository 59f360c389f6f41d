/**
 * The WireGuard port over the kernel's generic netlink (wg-codec.ts), on weft's netlink socket
 * opened for NETLINK_GENERIC, batched and answered as rtnetlink's are (rt-channel.ts). The family
 * id is asked of the controller once; a kernel without the module has no family `wireguard`
 * (ENOENT), which is how the backend learns to use its own data path.
 */
import { KernelError } from './netlink.js';
import { NETLINK_GENERIC, openNetlinkSocket } from './nl-socket.js';
import { RtChannel } from './rt-channel.js';
import { WG_GENL_NAME, decodeDevice, decodeFamilyId, encodeGetDevice, encodeGetFamily, encodeSetDevice } from './wg-codec.js';
import type { WgChange, WgDevice, WireGuardPort } from './wireguard.js';

export class WgNetlink implements WireGuardPort {
  readonly #open: () => RtChannel;
  #opened: RtChannel | undefined;
  #family: Promise<number> | undefined;

  /** The socket is opened at the first request: an agent whose kernel has no WireGuard never opens it. */
  constructor(open: () => RtChannel = () => new RtChannel((onData) => openNetlinkSocket({ protocol: NETLINK_GENERIC }, onData))) {
    this.#open = open;
  }

  get #channel(): RtChannel {
    return (this.#opened ??= this.#open());
  }

  /** The family's id; a KernelError (ENOENT) where the kernel has no WireGuard. */
  family(): Promise<number> {
    this.#family ??= this.#channel.request(encodeGetFamily(WG_GENL_NAME), 'the generic netlink family wireguard').then((parts) => {
      if (!parts[0]) throw new KernelError('the generic netlink family wireguard', 'ENOENT');
      return decodeFamilyId(parts[0]);
    });
    this.#family.catch(() => (this.#family = undefined));
    return this.#family;
  }

  async device(name: string): Promise<WgDevice | undefined> {
    const family = await this.family();
    try {
      return decodeDevice(await this.#channel.dump(encodeGetDevice(family, name), `read the WireGuard device ${name}`));
    } catch (err) {
      if (err instanceof KernelError && (err.errno === 'ENODEV' || err.errno === 'ENOENT')) return undefined;
      throw err;
    }
  }

  async configure(name: string, change: WgChange): Promise<void> {
    const family = await this.family();
    await this.#channel.write(encodeSetDevice(family, name, change), () => `configure the WireGuard device ${name}`);
  }

  close(): void {
    this.#opened?.close();
    this.#opened = undefined;
  }
}
