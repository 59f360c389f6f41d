/**
 * `--ip-blackhole-route` (flannel 0.21+, main.go): a blackhole route for each of the node's own
 * subnets, so that traffic to an address of the subnet that no pod holds is dropped here instead
 * of following the default route out; meant for setups without a bridge plugin (Canal), whose
 * per-pod routes are more specific. As flanneld: added where no blackhole route for the subnet
 * exists, every `--iptables-resync` seconds, the first time one period after start; never
 * replacing another route for the subnet (a bridge's), where flanneld logs an error each period
 * and weft once.
 */
import { type Clock, systemClock } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { type Cidr, cidrEquals, formatCidr } from '../ip/cidr.js';
import type { Netlink } from '../netlink/netlink.js';

export interface BlackholeOptions {
  readonly netlink: Pick<Netlink, 'routes' | 'addRoute'>;
  readonly log: Logger;
  /** The node's subnets now (they change when the lease moves). */
  readonly subnets: () => readonly Cidr[];
  readonly clock?: Clock;
}

export class BlackholeRoutes {
  readonly #o: BlackholeOptions;
  /** The last problem logged per subnet, so that each is said once. */
  readonly #said = new Map<string, string>();

  constructor(options: BlackholeOptions) {
    this.#o = options;
  }

  /** One pass: adds the missing blackhole routes; the number added. */
  async check(): Promise<number> {
    let added = 0;
    for (const subnet of this.#o.subnets()) {
      const key = formatCidr(subnet);
      try {
        const routes = await this.#o.netlink.routes(subnet.ip.family);
        if (routes.some((r) => r.type === 'blackhole' && cidrEquals(r.dst, subnet))) continue;
        await this.#o.netlink.addRoute({ dst: subnet, type: 'blackhole' });
        added++;
        this.#said.delete(key);
        this.#o.log.info({ subnet: key }, 'blackhole route added for this node\'s subnet');
      } catch (err) {
        const problem = errorMessage(err);
        if (this.#said.get(key) === problem) continue;
        this.#said.set(key, problem);
        const taken = (err as { errno?: string }).errno === 'EEXIST';
        this.#o.log.error({ err, subnet: key }, taken ? `cannot add a blackhole route for ${key}: another route for it exists (a bridge plugin's?)` : `failed to set up the blackhole route for ${key}: ${problem}`);
      }
    }
    return added;
  }

  /** Checks every `periodMs`, the first time one period after start, until `signal` aborts. */
  async run(periodMs: number, signal: AbortSignal): Promise<void> {
    const clock = this.#o.clock ?? systemClock;
    while (!signal.aborted) {
      try {
        await clock.sleep(periodMs, signal);
      } catch {
        return;
      }
      await this.check();
    }
  }
}
