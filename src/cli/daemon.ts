/**
 * `weft agent` (and `flanneld`): the composition root. Startup follows flanneld (spec §9.2):
 * flags, registry mode, health server, network config, external interface, backend, lease,
 * traffic rules, subnet file, then the long-running loops under one AbortSignal. Shutdown keeps
 * the lease, routes, devices and rules, so a restart changes nothing on the wire.
 *
 * It builds the graph and holds what the agent has learnt (the config, the interface, the
 * network, the lease, the registry's last word on it); everything else is derived from that:
 * the health verdict (health/health-verdict.ts) and the status report (status-report.ts).
 */
import { CniSocketServer } from '../cni/agent-socket.js';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { ErrorCodes, WeftError, errorMessage, isWeftError } from '../core/errors.js';
import { type Clock, systemClock } from '../core/clock.js';
import { FdHandover } from '../core/handover.js';
import { releaseCode, releaseMemory } from '../core/memory.js';
import type * as UdpEarly from '../backend/udp/udp-early.js';
import { type Logger, createLogger } from '../core/log.js';
import type { NetworkConfig } from '../config/network-config.js';
import { type Cidr, formatCidr } from '../ip/cidr.js';
import { BlackholeRoutes } from '../backend/blackhole-route.js';
import { type IpAddr, formatIp } from '../ip/ip.js';
import { type Lease, type LeaseAttrs, formatSubnetPair, leaseAttrsEqual, subnetPairEquals } from '../lease/lease.js';
import type { Network } from '../backend/backend.js';
import { backendFactory } from '../backend/registry.js';
import { enabledFamilies, familyPlanes, withLease } from '../backend/family-plane.js';
import type { ExternalInterface } from '../backend/external-interface.js';
import { FileKeyStore } from '../backend/key-store.js';
import { RtNetlink } from '../netlink/rtnetlink.js';
import type * as WgNetlinkModule from '../netlink/wg-netlink.js';
import { writeSubnetEnv } from '../subnet/subnet-env.js';
import { Iptables } from '../traffic/iptables.js';
import { detectIptablesVariant } from '../traffic/iptables-variant.js';
import { execCommand } from '../traffic/exec.js';
import type * as NftablesModule from '../traffic/nftables.js';
import type { TrafficManager } from '../traffic/traffic-manager.js';
import { startHealthServer } from '../health/health-server.js';
import { type HealthInput, healthVerdict } from '../health/health-verdict.js';
import { Metrics } from '../health/metrics.js';
import { publish, subscribe } from '../core/events.js';
import { version } from '../core/version.js';
import type { StatusReport } from './status-report.js';
import { type FlagValues, parseFlags, usage } from './flags.js';
import { agentFlags } from './options.js';
import { selectExternalInterface } from './external-iface.js';
import { agentFlagProblem } from './agent-checks.js';
import { brNetfilterProblem } from './br-netfilter.js';
import { takeAgentLock } from './agent-lock.js';
import { leftoverDevices, ownLeftovers } from '../backend/leftovers.js';
import { passPeriodMs } from '../backend/liveness-pass.js';
import type * as EtcdMode from './etcd-mode.js';
import type * as KubeMode from './kube-mode.js';
import type { RegistryMode } from './registry-mode.js';
import type { Io } from './io.js';
import { notifyReady } from './sd-notify.js';

// Code only some agents run is loaded when they need it (start-up time: docs/benchmarks.md).
const require = createRequire(import.meta.url);

type AgentFlags = FlagValues<typeof agentFlags>;

/** The reconciler's periodic pass (reconciler.ts' default): liveness allows three of them. */

/** flannel's WireGuard key file, unless WIREGUARD_KEY_FILE names another. */
const defaultKeyFile = '/run/flannel/wgkey';

export async function runAgent(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: Io): Promise<number> {
  const parsed = parseFlags(agentFlags, argv, env);
  if (parsed.help) {
    io.stderr(`Usage: weft agent [flags]  (also installed as flanneld)\n\n${usage(agentFlags)}`);
    return 0;
  }
  if (parsed.values.version) {
    io.stderr(`${version}\n`);
    return 0;
  }
  const flags = parsed.values;
  const problem = agentFlagProblem(flags);
  if (problem) {
    io.stderr(`weft agent: ${problem}\n`);
    return 2;
  }
  // Installed as flanneld, it logs as flanneld does (klog's text lines) unless told otherwise;
  // `weft agent` keeps JSON, one object a line.
  const chosen = parsed.given.has('log-format') || env['FLANNELD_LOG_FORMAT'];
  const format = chosen ? flags['log-format'] : env['WEFT_ARGV0'] === 'flanneld' ? 'text' : 'json';
  const log = createLogger({ level: flags.v > 0 ? 'debug' : 'info', bindings: { name: 'weft' }, format: format === 'text' ? 'text' : 'json' });
  // As flanneld (Go's flag and coreos flagutil): what follows the first non-flag argument is not
  // read, and a FLANNELD_* value that does not parse keeps the flag's default; both are said.
  if (parsed.positionals.length > 0) log.warn({ ignored: parsed.positionals }, 'arguments after the first that is not a flag are not read, as flanneld does not read them');
  for (const envProblem of parsed.envProblems) log.error({}, `Failed to set flag FLANNELD from env: ${envProblem}`);
  if (flags.vmodule || flags['log_backtrace_at']) log.warn({}, '-vmodule and -log_backtrace_at are accepted for compatibility and ignored: weft logs by level only (-v)');
  try {
    // flanneld listens on 0.0.0.0 unless told otherwise; /status and /metrics go beyond this host
    // only when the operator chose the address.
    const detailsFrom = parsed.given.has('healthz-ip') || env['FLANNELD_HEALTHZ_IP'] ? 'anywhere' : 'this-host';
    return await new Agent({ flags, log, env, detailsFrom, ...(io.handover ? { handover: io.handover } : {}) }).run(io.signal);
  } catch (err) {
    if (io.signal.aborted) {
      log.info({}, 'Exiting cleanly...');
      return 0;
    }
    log.error({ err }, `agent failed: ${errorMessage(err)}`);
    // Bad input (flags, files they name, the node's own setup) is the operator's to fix: 2, as docs/errors.md says.
    return isWeftError(err, ErrorCodes.CONFIG) ? 2 : 1;
  }
}

interface AgentOptions {
  readonly flags: AgentFlags;
  readonly log: Logger;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly handover?: FdHandover;
  readonly clock?: Clock;
  /** Who may read /metrics and /status (health-server.ts). */
  readonly detailsFrom: 'anywhere' | 'this-host';
}

/** The registry's last word on this node's lease, from the health check. */
interface LeaseCheckState {
  readonly held: boolean;
  /** When the registry last confirmed (ms since the epoch; 0: never). */
  readonly confirmedAt: number;
  readonly problem: string;
}

class Agent {
  readonly #o: AgentOptions;
  readonly #clock: Clock;
  /** How often the health check asks the registry for the lease. */
  readonly #checkMs: number;
  #registry: RegistryMode | undefined;
  #config: NetworkConfig | undefined;
  #iface: ExternalInterface | undefined;
  #network: Network | undefined;
  #lease: Lease | undefined;
  /** The rules are installed, and the subnet file written: `/readyz` (flannel 0.28's readiness). */
  #rulesOk = false;
  #fileOk = false;
  #rulesProblem = '';
  get #ready(): boolean {
    return this.#rulesOk && this.#fileOk;
  }
  #check: LeaseCheckState = { held: false, confirmedAt: 0, problem: 'starting' };
  /** Why the subnet file could not be written, '' once it was. */
  #subnetFileProblem = '';
  /** When the reconciler last finished a full pass: liveness, once the backend runs. */
  #lastPass: number | undefined;

  constructor(options: AgentOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#checkMs = Math.max(1, options.flags['registry-check-interval']) * 1000;
  }

  async run(signal: AbortSignal): Promise<number> {
    const unlock = await takeAgentLock(this.#o.flags['subnet-file']);
    try {
      return await this.#run(signal);
    } finally {
      await unlock();
    }
  }

  async #run(signal: AbortSignal): Promise<number> {
    const { flags, log } = this.#o;
    const inner = new AbortController();
    const scope = AbortSignal.any([signal, inner.signal]);
    const tasks: Array<Promise<unknown>> = [];
    const kube = flags['kube-subnet-mgr'];
    const handover = this.#o.handover ?? new FdHandover();
    const stateFile = `${flags['subnet-file']}.state`;
    // One registry mode's code is loaded, not both (kube mode's client, informers and policy engine are a third of weft's modules).
    const etcd = kube ? undefined : (require('./etcd-mode.js') as typeof EtcdMode);
    // The node binary's code that each step of start-up runs (module loading, TLS, the device's
    // set-up) is unmapped as the step ends (core/memory.ts): left mapped, it stacked up to 10 MB
    // of file-backed pages under the peers' burst, which was the agent's peak (docs/benchmarks.md).
    releaseCode();
    log.info({ version, registry: kube ? 'kubernetes' : 'etcd', ...(etcd ? { endpoints: etcd.shownEtcdEndpoints(flags['etcd-endpoints']), prefix: flags['etcd-prefix'] } : {}) }, 'weft agent starting');
    // udp: forward with the last known table while the registry is not reached yet.
    // (Its code is loaded only where a udp backend left its table.)
    const early = existsSync(stateFile) ? await (require('../backend/udp/udp-early.js') as typeof UdpEarly).startUdpFromSnapshot({ stateFile, log: log.child({ component: 'udp' }), handover }) : undefined;
    let registry: RegistryMode;
    try {
      registry = etcd ? await etcd.etcdMode(flags, log, this.#clock) : await (require('./kube-mode.js') as typeof KubeMode).kubeMode({ flags, env: this.#o.env, log, checkMs: this.#checkMs, clock: this.#clock });
    } catch (err) {
      early?.passOn(handover);
      throw err;
    }
    this.#registry = registry;
    releaseCode();
    const manager = registry.manager;
    let nl: RtNetlink | undefined;
    // A loop that fails stops the agent: it exits 1 and its supervisor starts it again.
    const guard = (p: Promise<unknown>, what: string): Promise<unknown> =>
      p.catch((err: unknown) => {
        if (scope.aborted) return;
        log.error({ err }, `${what} failed; stopping`);
        inner.abort(err);
      });
    try {
      // First thing inside the try, so that whatever fails after it, the finally stops it.
      tasks.push(guard(registry.run(scope), `${registry.kind} registry`));
      // The host's CNI plugin runs its logic here: served from the start, so that a pod's DEL, and
      // an ADD's "try again later" while there is no subnet yet, come from the agent.
      tasks.push(guard(new CniSocketServer({ subnetFile: flags['subnet-file'], log: log.child({ component: 'cni' }), clock: this.#clock }).run(scope), 'CNI plugin socket'));
      nl = new RtNetlink();
      if (flags['healthz-port'] > 0) tasks.push((await this.#serveHealth(scope)).closed);
      const config = await manager.getNetworkConfig(scope);
      this.#config = config;
      releaseCode();
      const noBridgeFilter = brNetfilterProblem(config, existsSync);
      if (noBridgeFilter) throw new WeftError(ErrorCodes.CONFIG, noBridgeFilter);
      const overrides = await registry.publicIpOverrides(scope);
      const publicIps = { publicIp: flags['public-ip'], publicIpv6: flags['public-ipv6'] };
      for (const key of ['publicIp', 'publicIpv6'] as const) {
        if (!overrides[key]) continue;
        log.info({ [key]: overrides[key] }, 'public address taken from the node\'s annotation');
        publicIps[key] = overrides[key];
      }
      const { iface, how, skipped } = await selectExternalInterface(nl, {
        iface: flags.iface,
        ifaceRegex: flags['iface-regex'],
        ifaceCanReach: flags['iface-can-reach'],
        ...publicIps,
        families: enabledFamilies(config),
      });
      for (const reason of skipped) log.info({ reason }, 'could not use an interface the flags name; trying the next');
      const planes = familyPlanes(config, iface);
      const text = (ip: IpAddr | undefined): string | undefined => (ip ? formatIp(ip) : undefined);
      log.info(
        { iface: iface.name, chosenBy: how, ifaceAddr: text(iface.ifaceAddr), ifaceAddr6: text(iface.ifaceAddr6), publicIp: text(iface.publicIp), publicIpv6: text(iface.publicIpv6), mtu: iface.mtu, families: planes.map((p) => p.family) },
        'using external interface',
      );
      this.#iface = iface;
      // The rule tools are checked (nft present, fully-random probed) before a lease is taken: a
      // node that cannot keep its rules must not hold a subnet it will never serve. The check runs
      // while what this node published before is read (one does not need the other); a failure
      // is met where it is awaited. (Begun while the interface is chosen, or its six saves run at
      // once, it gained nothing: their spawns hold the one JavaScript thread; docs/benchmarks.md.)
      const trafficReady = this.#trafficManager(config);
      trafficReady.catch(() => undefined);
      const previous = await manager.previousAttrs(planes[0]!.publicIp, scope).catch((err: unknown) => {
        if (scope.aborted) throw err;
        log.warn({ err }, `could not read what this node published before; a recreated vxlan device gets a new MAC: ${errorMessage(err)}`);
        return undefined;
      });
      const traffic = await trafficReady;
      publish('rules.mode', { mode: traffic.mode });
      if (config.backend.type === 'udp') early?.handTo(handover);
      else early?.close();
      const factory = backendFactory(config.backend.type);
      await removeLeftovers(nl, factory.deviceNames(config), previous, log);
      const network = await factory.create(
        config,
        {
          netlink: nl,
          log: log.child({ component: config.backend.type }),
          extIface: iface,
          planes,
          keys: new FileKeyStore(this.#o.env['WIREGUARD_KEY_FILE'] || defaultKeyFile),
          ...(this.#o.env['WEFT_WIREGUARD_SOCKET_DIR'] ? { wireguardSocketDir: this.#o.env['WEFT_WIREGUARD_SOCKET_DIR'] } : {}),
          ...(this.#o.env['WEFT_WIREGUARD'] === 'userspace' ? { wireguardPath: 'userspace' as const } : {}),
          ...(config.backend.type === 'wireguard' ? { wireguard: new (require('../netlink/wg-netlink.js') as typeof WgNetlinkModule).WgNetlink() } : {}),
          clock: this.#clock,
          ...(previous ? { previous } : {}),
          stateFile,
          handover,
        },
        scope,
      );
      this.#network = network;
      // In etcd mode a collection: the listing read for what this node published before is
      // garbage now, and the allocation lists every lease again; left to V8, the two listings'
      // objects stacked up in the old generation (13 MB with 5000 leases), which was the start's
      // peak. The code stays mapped here (the lease and the burst run next; the burst's start
      // unmaps it): unmapping it here cost this critical path time and the peak nothing
      // (docs/benchmarks.md). Kube mode read its own Node with one GET (the list of every Node
      // may still be arriving): nothing to collect, and the code start-up ran goes.
      if (etcd) releaseMemory();
      else releaseCode();
      const lease = await manager.acquireLease(network.attrs, scope);
      this.#lease = lease;
      this.#check = { held: true, confirmedAt: this.#clock.now(), problem: '' };
      await network.setLease(lease, scope);
      // Peers are programmed from here, while the rules and the subnet file are written: pods come
      // only after the subnet file, and a peer's packets before the rules meet no pod yet.
      // Liveness: the reconciler's passes (the first, every periodic one, every repair).
      this.#lastPass = this.#clock.now();
      const offPass = subscribe('reconcile', () => (this.#lastPass = this.#clock.now()));
      scope.addEventListener('abort', offPass, { once: true });
      tasks.push(guard(network.run(manager.watchLeases(scope), scope), 'backend'));
      await traffic.removeOtherMode().catch((err: unknown) => log.error({ err }, `could not remove the rules of flannel's other traffic mode: ${errorMessage(err)}`));
      // As flanneld: rules that cannot be installed (no iptables binary, a refused restore) leave
      // the agent running and not ready; they are tried again every resync period.
      await this.#applyRules(traffic, withLease(planes, lease));
      // As flanneld: a subnet file that cannot be written leaves the agent running, not ready
      // (the CNI plugin has no subnet to give pods), and it is tried again every resync period.
      this.#fileOk = await this.#writeSubnetFile(config, lease, network);
      log.info({ subnet: formatSubnetPair(lease.subnet), backend: config.backend.type, mtu: network.mtu, ready: this.#rulesOk && this.#fileOk }, 'weft agent is up');
      tasks.push(guard(this.#keepSubnetFile(config, network, scope), 'subnet file'));
      tasks.push(guard(this.#keepRules(traffic, planes, scope), `${traffic.mode} resync`));
      if (flags['ip-blackhole-route']) {
        const blackhole = new BlackholeRoutes({
          netlink: nl,
          log: log.child({ component: 'blackhole' }),
          clock: this.#clock,
          subnets: () => [this.#lease?.subnet.ipv4, this.#lease?.subnet.ipv6].filter((c): c is Cidr => c !== undefined),
        });
        tasks.push(guard(blackhole.run(flags['iptables-resync'] * 1000, scope), 'blackhole routes'));
      }
      tasks.push(guard(this.#holdLease(network, traffic, scope), 'lease keeper'));
      tasks.push(guard(this.#checkLease(scope), 'health check'));
      await notifyReady(this.#o.env, log);
      tasks.push(guard(registry.networkUp(scope), 'NetworkUnavailable update'));
      // A loop may have failed already, and an aborted signal fires no more 'abort' events.
      if (!scope.aborted) await new Promise<void>((resolve) => scope.addEventListener('abort', () => resolve(), { once: true }));
    } finally {
      early?.passOn(handover);
      inner.abort();
      await Promise.allSettled(tasks);
      registry.close();
      nl?.close();
    }
    if (!signal.aborted) return 1;
    log.info({}, 'Exiting cleanly...');
    return 0;
  }

  /** The health server with /metrics and /status, listening; `closed` settles once it has closed. */
  async #serveHealth(signal: AbortSignal): Promise<{ closed: Promise<void> }> {
    const { flags, log } = this.#o;
    const metrics = new Metrics({ version, lastContact: () => this.#check.confirmedAt || undefined, packetCounters: () => this.#network?.packetCounters(), policy: () => this.#registry?.policy() });
    const health = await startHealthServer(
      { host: flags['healthz-ip'], port: flags['healthz-port'], log: log.child({ component: 'health' }), state: () => this.#health(), metrics: () => metrics.render(), status: () => this.#status(), detailsFrom: this.#o.detailsFrom },
      signal,
    );
    return { closed: health.closed.finally(() => metrics.close()) };
  }

  /** Renewals and take-backs of the lease; the node follows a lease that moved. */
  async #holdLease(network: Network, traffic: TrafficManager, signal: AbortSignal): Promise<void> {
    const config = this.#config!;
    const planes = familyPlanes(config, this.#iface!);
    for await (const next of this.#registry!.manager.holdLease(signal)) {
      const before = this.#lease;
      this.#lease = next;
      // A renewal changes only the expiry: nothing on the node depends on it.
      if (before && subnetPairEquals(before.subnet, next.subnet) && leaseAttrsEqual(before.attrs, next.attrs)) continue;
      await network.setLease(next, signal);
      await this.#applyRules(traffic, withLease(planes, next));
      this.#fileOk = await this.#writeSubnetFile(config, next, network);
    }
  }

  /** iptables, or nftables when the network config sets EnableNFTables (flannel 0.28). */
  async #trafficManager(config: NetworkConfig): Promise<TrafficManager> {
    const { flags, log } = this.#o;
    const options = {
      log: log.child({ component: config.enableNFTables ? 'nftables' : 'iptables' }),
      resyncMs: flags['iptables-resync'] * 1000,
      rules: { masquerade: flags['ip-masq'], forward: flags['iptables-forward-rules'], randomFully: !flags['ip-masq-fully-random-disable'] },
    };
    if (config.enableNFTables) return (require('../traffic/nftables.js') as typeof NftablesModule).Nftables.create(options);
    // Where kube-proxy's and Docker's rules are, as flannel's image (iptables-wrapper) decides.
    const { variant, why } = await detectIptablesVariant(execCommand);
    log.info({ variant: variant ?? 'as installed', why }, `iptables: ${variant ? `iptables-${variant}` : 'iptables'}`);
    return new Iptables({ ...options, ...(variant ? { variant } : {}) });
  }

  /** Installs the rules; a failure is logged once per problem and leaves the agent not ready. */
  async #applyRules(traffic: TrafficManager, families: Parameters<TrafficManager['apply']>[0]): Promise<void> {
    try {
      await traffic.apply(families);
    } catch (err) {
      const problem = errorMessage(err);
      if (problem !== this.#rulesProblem) this.#o.log.error({ err }, `cannot install the ${traffic.mode} rules; not ready until they are in (tried again every ${this.#o.flags['iptables-resync']} s): ${problem}`);
      this.#rulesProblem = problem;
      this.#rulesOk = false;
      return;
    }
    if (this.#rulesProblem) this.#o.log.info({}, `the ${traffic.mode} rules are in`);
    this.#rulesProblem = '';
    this.#rulesOk = true;
  }

  /** Installs the rules until they are in, then keeps them (the traffic manager's resync). */
  async #keepRules(traffic: TrafficManager, planes: ReturnType<typeof familyPlanes>, signal: AbortSignal): Promise<void> {
    while (!this.#rulesOk && !signal.aborted) {
      try {
        await this.#clock.sleep(this.#o.flags['iptables-resync'] * 1000, signal);
      } catch {
        return;
      }
      if (this.#lease) await this.#applyRules(traffic, withLease(planes, this.#lease));
    }
    await traffic.run(signal);
  }

  /** Writes the subnet file; false (logged once per problem) when it cannot. */
  async #writeSubnetFile(config: NetworkConfig, lease: Lease, network: Network): Promise<boolean> {
    const { flags, log } = this.#o;
    try {
      await writeSubnetEnv(flags['subnet-file'], {
        ...(config.enableIPv4 && config.network ? { network: config.network } : {}),
        ...(config.enableIPv4 && lease.subnet.ipv4 ? { subnet: lease.subnet.ipv4 } : {}),
        ...(config.enableIPv6 && config.ipv6Network && lease.subnet.ipv6 ? { ipv6Network: config.ipv6Network, ipv6Subnet: lease.subnet.ipv6 } : {}),
        mtu: network.mtu,
        ipMasq: flags['ip-masq'],
      });
    } catch (err) {
      const problem = errorMessage(err);
      if (problem !== this.#subnetFileProblem) log.error({ err, file: flags['subnet-file'] }, `cannot write the subnet file; not ready until it is written (tried again every ${flags['iptables-resync']} s): ${problem}`);
      this.#subnetFileProblem = problem;
      return false;
    }
    if (this.#subnetFileProblem) log.info({ file: flags['subnet-file'] }, 'the subnet file could be written again; ready');
    this.#subnetFileProblem = '';
    log.info({ file: flags['subnet-file'], subnet: formatSubnetPair(lease.subnet) }, 'subnet file written');
    return true;
  }

  /** Writes the subnet file again every resync period while the last write failed. */
  async #keepSubnetFile(config: NetworkConfig, network: Network, signal: AbortSignal): Promise<void> {
    const periodMs = this.#o.flags['iptables-resync'] * 1000;
    while (!signal.aborted) {
      try {
        await this.#clock.sleep(periodMs, signal);
      } catch {
        return;
      }
      if (this.#subnetFileProblem && this.#lease) this.#fileOk = await this.#writeSubnetFile(config, this.#lease, network);
    }
  }

  /** Every interval: does the registry still hold our lease, and when did it last say so? */
  async #checkLease(signal: AbortSignal): Promise<void> {
    const manager = this.#registry!.manager;
    while (!signal.aborted) {
      try {
        const check = await manager.checkLease(AbortSignal.any([signal, AbortSignal.timeout(this.#checkMs)]));
        this.#check = { held: check.held, confirmedAt: check.confirmedAt, problem: check.held ? '' : 'the registry does not hold this node\'s lease' };
        const expiresAt = this.#lease?.expiresAt;
        publish('lease', { held: check.held, ...(expiresAt !== undefined ? { expiresAt } : {}) });
      } catch (err) {
        if (signal.aborted) return;
        this.#check = { ...this.#check, problem: `registry unreachable: ${errorMessage(err)}` };
      }
      try {
        await this.#clock.sleep(this.#checkMs, signal);
      } catch {
        return;
      }
    }
  }

  #health(): ReturnType<typeof healthVerdict> {
    const input: HealthInput = {
      now: this.#clock.now(),
      subnet: this.#lease ? formatSubnetPair(this.#lease.subnet) : undefined,
      ready: this.#ready,
      lastContact: this.#check.confirmedAt,
      held: this.#check.held,
      problem: this.#check.problem,
      checkMs: this.#checkMs,
      ...(this.#lastPass !== undefined ? { lastPass: this.#lastPass, passMs: passPeriodMs } : {}),
    };
    return healthVerdict(input);
  }

  /** The report `weft status` prints, from what the agent holds in memory: no request is made. */
  #status(): StatusReport {
    const flags = this.#o.flags;
    const health = this.#health();
    const { lease, config, iface, network } = { lease: this.#lease, config: this.#config, iface: this.#iface, network: this.#network };
    const packets = network?.packetCounters();
    const changedAt = this.#registry?.configChangedAt();
    const policy = this.#registry?.policy();
    return {
      version,
      registry: {
        kind: this.#registry?.kind ?? (flags['kube-subnet-mgr'] ? 'kubernetes' : 'etcd'),
        endpoints: this.#registry?.endpoints ?? [],
        healthy: health.healthy,
        reason: health.reason,
        ...(this.#check.confirmedAt ? { lastContact: this.#check.confirmedAt } : {}),
      },
      ...(lease && config
        ? {
            lease: {
              subnets: formatSubnetPair(lease.subnet),
              ...(lease.attrs.publicIp ? { publicIp: formatIp(lease.attrs.publicIp) } : {}),
              ...(lease.attrs.publicIpv6 ? { publicIpv6: formatIp(lease.attrs.publicIpv6) } : {}),
              backend: config.backend.type,
              ...(lease.expiresAt !== undefined ? { expiresAt: lease.expiresAt } : {}),
            },
          }
        : {}),
      ...(iface ? { iface: { name: iface.name, mtu: iface.mtu } } : {}),
      ...(config ? { networks: [config.enableIPv4 ? config.network : undefined, config.enableIPv6 ? config.ipv6Network : undefined].flatMap((n) => (n ? [formatCidr(n)] : [])) } : {}),
      subnetFile: flags['subnet-file'],
      ...(network ? { mtu: network.mtu } : {}),
      ...(config && this.#ready ? { trafficMode: config.enableNFTables ? 'nftables' : 'iptables' } : {}),
      peers: network?.peers() ?? [],
      ...(changedAt !== undefined ? { configChangedAt: changedAt } : {}),
      ...(this.#registry && this.#registry.skippedEntries().length > 0 ? { skipped: this.#registry.skippedEntries() } : {}),
      ...(policy ? { policy } : {}),
      ...(packets ? { packets: packets.counters, dataPath: `${packets.backend}, ${packets.path === 'userspace' ? 'weft\'s own' : 'the kernel\'s'}` } : {}),
    };
  }
}

/**
 * Deletes flannel's devices that this config's backend does not use (a backend switched, a VNI
 * changed, IPv6 turned off) and that this agent's previous lease shows it made, and the routes
 * the kernel keeps through them: left in place they carry pod traffic the new backend knows
 * nothing of. Another agent's devices (another network's) stay. Logged once per device; a failure
 * is logged and the agent goes on (the stale device then only wastes a name).
 */
async function removeLeftovers(nl: RtNetlink, used: readonly string[], previous: LeaseAttrs | undefined, log: Logger): Promise<void> {
  const links = await nl.links();
  const present = links.map((l) => ({ name: l.name, ...(l.mac ? { mac: l.mac } : {}) }));
  const own = ownLeftovers(present, used, previous);
  for (const name of leftoverDevices(present.map((d) => d.name), used)) {
    if (!own.includes(name)) {
      log.info({ device: name, keeping: used }, 'left a flannel device this backend does not use: this node\'s previous lease does not show it as this agent\'s (another network\'s agent may use it; weft cleanup removes it)');
      continue;
    }
    const link = links.find((l) => l.name === name)!;
    try {
      await nl.deleteLink(link.index);
      log.warn({ device: name, keeping: used }, 'removed a flannel device this backend does not use, with its routes');
    } catch (err) {
      log.error({ err, device: name }, `could not remove a flannel device this backend does not use: ${errorMessage(err)}`);
    }
  }
}
