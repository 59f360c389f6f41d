/**
 * The extension backend, as flannel's (pkg/backend/extension): commands from the network config do
 * the node's work. `PreStartupCommand`'s output becomes the lease's BackendData (a JSON string);
 * `PostStartupCommand` runs once the lease is held, with NETWORK, SUBNET, IPV6SUBNET, PUBLIC_IP
 * and PUBLIC_IPV6; `SubnetAddCommand` and `SubnetRemoveCommand` run for each peer lease of type
 * extension that comes and goes, with SUBNET and PUBLIC_IP and the peer's BackendData on their
 * input. The texts of the variables are Go's, as flannel formats them. No device, no kernel entry.
 */
import { type Clock, systemClock } from '../../core/clock.js';
import { ErrorCodes, WeftError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { NetworkConfig } from '../../config/network-config.js';
import { Values } from '../../core/values.js';
import { formatCidr } from '../../ip/cidr.js';
import { formatIp } from '../../ip/ip.js';
import { isJsonObject, member } from '../../json/go-json.js';
import { type Lease, type LeaseAttrs, type LeaseEvent, subnetPairEquals } from '../../lease/lease.js';
import type { BackendFactory, Network } from '../backend.js';
import { passEveryPeriod } from '../liveness-pass.js';
import { runCommand } from './extension-command.js';

/** The four commands; each may be absent. */
export interface ExtensionConfig {
  readonly preStartupCommand?: string;
  readonly postStartupCommand?: string;
  readonly subnetAddCommand?: string;
  readonly subnetRemoveCommand?: string;
}

const keys = ['PreStartupCommand', 'PostStartupCommand', 'SubnetAddCommand', 'SubnetRemoveCommand'] as const;

/** The backend options as Go decodes them (keys of any case); WEFT_ERR_CONFIG naming a bad one. */
export function parseExtensionConfig(config: NetworkConfig): ExtensionConfig {
  const backend = config.backend.options;
  const out: Record<string, string> = {};
  for (const key of keys) {
    const value = isJsonObject(backend) ? member(backend, key) : undefined;
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') throw new WeftError(ErrorCodes.CONFIG, `error decoding backend config: Backend.${key} must be a string`);
    if (value.trim() !== '') out[key[0]!.toLowerCase() + key.slice(1)] = value;
  }
  return out as ExtensionConfig;
}

export const extensionBackend: BackendFactory = {
  checkOptions(config) {
    parseExtensionConfig(config);
  },
  deviceNames: () => [],
  async create(config, deps) {
    const cmds = parseExtensionConfig(config);
    let backendData: string | undefined;
    if (cmds.preStartupCommand) {
      const r = await runCommand(cmds.preStartupCommand, {}, '');
      if (!r.ok) throw new WeftError(ErrorCodes.CONFIG, `failed to run command: ${cmds.preStartupCommand} Err: ${r.failure ?? ''} Output: ${r.output}`);
      deps.log.info({ command: cmds.preStartupCommand, output: r.output }, 'ran the pre-startup command');
      backendData = goJsonString(r.output);
    } else {
      deps.log.info({}, 'no pre-startup command configured: skipping');
    }
    // flannel publishes the interface's addresses here, not --public-ip.
    const v4 = deps.extIface.ifaceAddr;
    const v6 = deps.extIface.ifaceAddr6;
    const attrs: LeaseAttrs = {
      publicIp: v4 ?? { family: 4, value: 0n },
      ...(v6 ? { publicIpv6: v6 } : {}),
      backendType: 'extension',
      ...(backendData !== undefined ? { backendData } : {}),
    };
    return new ExtensionNetwork(config, cmds, attrs, deps.extIface.mtu, deps.log, deps.clock ?? systemClock);
  },
};

class ExtensionNetwork implements Network {
  readonly attrs: LeaseAttrs;
  readonly mtu: number;
  readonly #config: NetworkConfig;
  readonly #cmds: ExtensionConfig;
  readonly #log: Logger;
  readonly #clock: Clock;
  #lease: Lease | undefined;

  constructor(config: NetworkConfig, cmds: ExtensionConfig, attrs: LeaseAttrs, mtu: number, log: Logger, clock: Clock) {
    this.#config = config;
    this.#cmds = cmds;
    this.attrs = attrs;
    this.mtu = mtu;
    this.#log = log;
    this.#clock = clock;
  }

  /** The post-startup command, once, when the first lease is held; its failure stops the agent, as flanneld's. */
  async setLease(lease: Lease): Promise<void> {
    const first = this.#lease === undefined;
    this.#lease = lease;
    if (!first) return;
    const cmd = this.#cmds.postStartupCommand;
    if (!cmd) {
      this.#log.info({}, 'no post-startup command configured: skipping');
      return;
    }
    const vars = {
      NETWORK: goCidr(this.#config.network, 4),
      SUBNET: goCidr(lease.subnet.ipv4, 4),
      IPV6SUBNET: goCidr(lease.subnet.ipv6, 6),
      PUBLIC_IP: goIp(this.attrs.publicIp),
      PUBLIC_IPV6: this.attrs.publicIpv6 ? formatIp(this.attrs.publicIpv6) : '<nil>',
    };
    const r = await runCommand(cmd, vars, '');
    if (!r.ok) throw new WeftError(ErrorCodes.CONFIG, `failed to run command: ${cmd} Err: ${r.failure ?? ''} Output: ${r.output}`);
    this.#log.info({ command: cmd, output: r.output }, 'ran the post-startup command');
  }

  /** The subnet commands for each peer lease of type extension, in the order the events come. */
  async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    const ticker = passEveryPeriod(this.#clock, signal);
    // Each batch let go once handled (core/values.ts): the first is every peer.
    const batches = new Values(events);
    try {
      await batches.each(async (batch) => {
        if (signal.aborted) return;
        for (const event of batch) await this.#handle(event);
      });
    } finally {
      await batches.close();
      await ticker;
    }
  }

  async #handle(event: LeaseEvent): Promise<void> {
    const { lease } = event;
    if (this.#lease && subnetPairEquals(lease.subnet, this.#lease.subnet)) return;
    const subnet = goCidr(lease.subnet.ipv4, 4);
    if (lease.attrs.backendType !== 'extension') {
      this.#log.warn({ subnet, type: lease.attrs.backendType ?? '' }, 'ignoring a lease of another backend type');
      return;
    }
    const cmd = event.type === 'added' ? this.#cmds.subnetAddCommand : this.#cmds.subnetRemoveCommand;
    if (!cmd) return;
    // The peer's BackendData is a JSON string (its pre-startup command's output); it goes on the input.
    let input = '';
    if (lease.attrs.backendData !== undefined) {
      try {
        const parsed: unknown = JSON.parse(lease.attrs.backendData);
        if (typeof parsed !== 'string') throw new Error('not a JSON string');
        input = parsed;
      } catch (err) {
        this.#log.error({ subnet, err }, 'failed to unmarshal BackendData: not a JSON string; the command is not run');
        return;
      }
    }
    const r = await runCommand(cmd, { SUBNET: subnet, PUBLIC_IP: goIp(lease.attrs.publicIp) }, input);
    if (r.ok) this.#log.info({ command: cmd, subnet, output: r.output }, `ran the subnet ${event.type === 'added' ? 'add' : 'remove'} command`);
    else this.#log.error({ command: cmd, subnet, failure: r.failure, output: r.output }, `failed to run the subnet ${event.type === 'added' ? 'add' : 'remove'} command`);
  }

  peers(): [] {
    return [];
  }

  packetCounters(): undefined {
    return undefined;
  }
}

/** An IPv4 address as Go's IP4 prints it: the zero value is 0.0.0.0. */
function goIp(ip: Parameters<typeof formatIp>[0] | undefined): string {
  return ip ? formatIp(ip) : '0.0.0.0';
}

/** A subnet as Go's IP4Net / IP6Net print it: the zero value is 0.0.0.0/0 or ::/0. */
function goCidr(cidr: Parameters<typeof formatCidr>[0] | undefined, family: 4 | 6): string {
  return cidr ? formatCidr(cidr) : family === 4 ? '0.0.0.0/0' : '::/0';
}

/** A string as Go's json.Marshal writes it: HTML-safe (<, >, & escaped) and U+2028/U+2029 escaped. */
export function goJsonString(text: string): string {
  return JSON.stringify(text).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
