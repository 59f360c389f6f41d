/**
 * File descriptors handed from an agent to the agent that replaces it in a graceful restart
 * (SIGHUP: the process re-executes itself, docs/agent.md). The udp backend's TUN device and socket
 * go across so that no packet is lost: while no thread reads them, the kernel queues what arrives.
 * The fds travel open across execve, named in one environment variable; this module only keeps
 * the names. Pure: no I/O.
 */
export const handoverEnv = 'WEFT_INHERITED_FDS';

export class FdHandover {
  readonly #inherited = new Map<string, number>();
  readonly #outgoing = new Map<string, number>();

  /** `value`: the variable as the previous agent set it, e.g. `udp-tun=21,udp-socket=22`. */
  constructor(value?: string) {
    for (const part of (value ?? '').split(',')) {
      const m = /^([a-z0-9-]+)=(\d{1,9})$/.exec(part.trim());
      if (m && Number(m[2]) > 2) this.#inherited.set(m[1]!, Number(m[2]));
    }
  }

  /** The inherited fd of that name, once: the caller now owns it. */
  take(name: string): number | undefined {
    const fd = this.#inherited.get(name);
    this.#inherited.delete(name);
    return fd;
  }

  /**
   * Offers `fd` under `name` to a later taker in this process, as if inherited: the udp packet
   * path started from its snapshot hands its device and socket to the backend this way.
   */
  give(name: string, fd: number): void {
    this.#inherited.set(name, fd);
  }

  /** Inherited fds that nobody took (a changed config): the caller closes them. */
  untaken(): number[] {
    return [...this.#inherited.values()];
  }

  /** Hands `fd` to the next agent should this one re-execute itself (the caller cleared FD_CLOEXEC). */
  pass(name: string, fd: number): void {
    this.#outgoing.set(name, fd);
  }

  /** The variable for the next agent, or undefined when there is nothing to hand over. */
  outgoing(): string | undefined {
    if (this.#outgoing.size === 0) return undefined;
    return [...this.#outgoing].map(([name, fd]) => `${name}=${fd}`).join(',');
  }
}
