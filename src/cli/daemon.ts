/**
 * `weft agent` (and `flanneld`): the composition root. Startup follows flanneld (spec §9.2):
 * flags, subnet manager, health server, network config, external interface, backend, lease,
 * traffic rules, subnet file, then the long-running loops under one AbortSignal. Shutdown keeps
 * the lease, routes, devices and rules, so a restart changes nothing on the wire.
 */
import { readFile } from 'node:fs/promises';
import { ErrorCodes, WeftError, errorMessage, isWeftError } from '../core/errors.js';
import type { FdHandover } from '../core/handover.js';
import type { SubnetManager } from '../subnet/subnet-manager.js';
import { type Logger, createLogger } from '../core/log.js';
import { delay } from '../core/abort.js';
import type { NetworkConfig } from '../config/network-config.js';
import { formatIp } from '../ip/ip.js';
import { type Lease, formatSubnetPair, leaseAttrsEqual, subnetPairEquals } from '../lease/lease.js';
import type { Network } from '../backend/backend.js';
import { backendFactory, checkBackend } from '../backend/registry.js';
import { enabledFamilies, familyPlanes, withLease } from '../backend/family-plane.js';
import { RtNetlink } from '../netlink/rtnetlink.js';
import { readSubnetEnv, writeSubnetEnv } from '../subnet/subnet-env.js';
import { Iptables } from '../traffic/iptables.js';
import { Nftables } from '../traffic/nftables.js';
import type { TrafficManager } from '../traffic/traffic-manager.js';
import { startHealthServer } from '../health/health-server.js';
import { Metrics } from '../health/metrics.js';
import { publish, subscribe } from '../core/events.js';
import type { ExternalInterface } from '../backend/external-interface.js';
import { FileKeyStore } from '../backend/key-store.js';
import type { StatusReport } from './status-report.js';
import { type FlagValues, parseFlags, usage } from './flags.js';
import { agentFlags } from './options.js';
import { selectExternalInterface } from './external-iface.js';
import { agentFlagProblem } from './agent-checks.js';
import { version } from '../core/version.js';
import type { Io } from './io.js';
import { notifyReady } from './sd-notify.js';

type AgentFlags = FlagValues<typeof agentFlags>;


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
  if (parsed.positionals.length > 0) {
    io.stderr(`weft agent: unexpected arguments: ${parsed.positionals.join(' ')}\n`);
    return 2;
  }
  const problem = agentFlagProblem(flags);
  if (problem) {
    io.stderr(`weft agent: ${problem}\n`);
    return 2;
  }
  const log = createLogger({ level: flags.v > 0 ? 'debug' : 'info', bindings: { name: 'weft' }, format: flags['log-format'] === 'text' ? 'text' : 'json' });
  try {
    return await new Agent(flags, log, env, io.handover).run(io.signal);
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

class Agent {
  readonly #flags: AgentFlags;
  readonly #log: Logger;
  #ready = false;
  #lease: Lease | undefined;
  /** What `weft status` shows, as the agent learns it. */
  #network: Network | undefined;
  #iface: ExternalInterface | undefined;
  #backendType = '';
  #trafficMode: string | undefined;
  #leaseExpiresAt: number | undefined;
  #apiServer: string | undefined;
  #leaseOk = false;
  #lastContact = 0;
  #lastProblem = 'starting';
  /** How often the health check asks the registry for the lease; three missed answers are unhealthy. */
  readonly #checkMs: number;

  readonly #env: Readonly<Record<string, string | undefined>>;

  readonly #handover: FdHandover | undefined;

  constructor(flags: AgentFlags, log: Logger, env: Readonly<Record<string, string | undefined>>, handover?: FdHandover) {
    this.#handover = handover;
    this.#flags = flags;
    this.#log = log;
    this.#env = env;
    this.#checkMs = Math.max(1, flags['registry-check-interval']) * 1000;
  }

  async run(signal: AbortSignal): Promise<number> {
    const flags = this.#flags;
    const log = this.#log;
    const inner = new AbortController();
    const scope = AbortSignal.any([signal, inner.signal]);
    const tasks: Array<Promise<unknown>> = [];
    const kube = flags['kube-subnet-mgr'];
    log.info(
      { version, registry: kube ? 'kubernetes' : 'etcd', ...(kube ? {} : { endpoints: flags['etcd-endpoints'].split(',').map((e) => e.trim()).filter(Boolean), prefix: flags['etcd-prefix'] }) },
      'weft agent starting',
    );
    const { manager, close, networkUp, background, nodePublicIps } = await this.#subnetManager();
    let nl: RtNetlink | undefined;
    try {
      // First thing inside the try, so that whatever fails after it, the finally stops it.
      if (background) tasks.push(background(scope));
      nl = new RtNetlink();
      if (flags['healthz-port'] > 0) {
        const metrics = new Metrics({ version, lastContact: () => this.#lastContact || undefined, packetCounters: () => this.#network?.packetCounters() });
        const stopWatchingLease = subscribe('lease', (m) => (this.#leaseExpiresAt = m.expiresAt));
        const health = await startHealthServer(
          {
            host: flags['healthz-ip'],
            port: flags['healthz-port'],
            log: log.child({ component: 'health' }),
            state: () => this.#health(),
            metrics: () => metrics.render(),
            status: () => this.#status(),
          },
          scope,
        );
        tasks.push(
          health.closed.finally(() => {
            metrics.close();
            stopWatchingLease();
          }),
        );
      }
      const config = await manager.getNetworkConfig(scope);
      const publicIps = { publicIp: flags['public-ip'], publicIpv6: flags['public-ipv6'] };
      if (nodePublicIps) {
        // flannel 0.28: the Node's node-public-ip(v6) annotations win over the flags.
        const annotated = await nodePublicIps(scope);
        for (const key of ['publicIp', 'publicIpv6'] as const) {
          if (!annotated[key]) continue;
          log.info({ [key]: annotated[key] }, 'public address taken from the node\'s annotation');
          publicIps[key] = annotated[key];
        }
      }
      const { iface, how } = await selectExternalInterface(nl, {
        iface: flags.iface,
        ifaceRegex: flags['iface-regex'],
        ifaceCanReach: flags['iface-can-reach'],
        ...publicIps,
        families: enabledFamilies(config),
      });
      const planes = familyPlanes(config, iface);
      log.info(
        { iface: iface.name, chosenBy: how, publicIp: iface.publicIp ? formatIp(iface.publicIp) : undefined, publicIpv6: iface.publicIpv6 ? formatIp(iface.publicIpv6) : undefined, mtu: iface.mtu, families: planes.map((p) => p.family) },
        'using external interface',
      );
      const previous = await manager.previousAttrs(planes[0]!.publicIp, scope).catch((err: unknown) => {
        if (scope.aborted) throw err;
        log.warn({ err }, `could not read what this node published before; a recreated vxlan device gets a new MAC: ${errorMessage(err)}`);
        return undefined;
      });
      const keys = new FileKeyStore(this.#env['WIREGUARD_KEY_FILE'] || '/run/flannel/wgkey');
      const deps = { netlink: nl, log: log.child({ component: config.backend.type }), extIface: iface, planes, keys, ...(previous ? { previous } : {}), ...(this.#handover ? { handover: this.#handover } : {}) };
      const network = await backendFactory(config.backend.type).create(config, deps, scope);
      this.#network = network;
      this.#iface = iface;
      this.#backendType = config.backend.type;
      const lease = await manager.acquireLease(network.attrs, scope);
      this.#lease = lease;
      this.#leaseOk = true;
      this.#lastContact = Date.now();
      await network.setLease(lease, scope);
      const traffic = await this.#trafficManager(config);
      this.#trafficMode = traffic.mode;
      await traffic.removeOtherMode().catch((err: unknown) => log.error({ err }, `could not remove the rules of flannel's other traffic mode: ${errorMessage(err)}`));
      await traffic.apply(withLease(planes, lease));
      await this.#writeSubnetFile(config, lease, network);
      this.#ready = true;
      log.info({ subnet: formatSubnetPair(lease.subnet), backend: config.backend.type, mtu: network.mtu }, 'weft agent is up');

      const guard = (p: Promise<unknown>, what: string): Promise<unknown> =>
        p.catch((err: unknown) => {
          if (scope.aborted) return;
          log.error({ err }, `${what} failed; stopping`);
          inner.abort(err);
        });
      tasks.push(guard(network.run(manager.watchLeases(scope), scope), 'backend'));
      tasks.push(guard(traffic.run(scope), `${traffic.mode} resync`));
      tasks.push(
        guard(
          (async () => {
            for await (const next of manager.holdLease(scope)) {
              const before = this.#lease;
              this.#lease = next;
              this.#leaseExpiresAt = next.expiresAt;
              // A renewal changes only the expiry: nothing on the node depends on it.
              if (before && subnetPairEquals(before.subnet, next.subnet) && leaseAttrsEqual(before.attrs, next.attrs)) continue;
              await network.setLease(next, scope);
              await traffic.apply(withLease(planes, next));
              await this.#writeSubnetFile(config, next, network);
            }
          })(),
          'lease keeper',
        ),
      );
      tasks.push(guard(this.#checkHealth(manager, scope), 'health check'));
      await notifyReady(this.#env, log);
      if (networkUp) tasks.push(guard(networkUp(scope), 'NetworkUnavailable update'));
      // A loop may have failed already, and an aborted signal fires no more 'abort' events.
      if (!scope.aborted) await new Promise<void>((resolve) => scope.addEventListener('abort', () => resolve(), { once: true }));
    } finally {
      inner.abort();
      await Promise.allSettled(tasks);
      close();
      nl?.close();
    }
    if (!signal.aborted) return 1;
    log.info({}, 'Exiting cleanly...');
    return 0;
  }

  /**
   * etcd (default) or, with --kube-subnet-mgr, the Kubernetes API; each loaded only when used.
   * `background` runs the kube manager's Node informer; the agent starts it first, so that its
   * list runs while the agent looks for its interface.
   */
  async #subnetManager(): Promise<{
    manager: SubnetManager;
    close: () => void;
    networkUp?: (signal: AbortSignal) => Promise<void>;
    background?: (signal: AbortSignal) => Promise<void>;
    nodePublicIps?: (signal: AbortSignal) => Promise<{ publicIp: string; publicIpv6: string }>;
  }> {
    const flags = this.#flags;
    const log = this.#log.child({ component: 'subnet' });
    if (flags['kube-subnet-mgr']) {
      const [{ KubeManager }, { KubeClient }, { loadKubeAccess }] = await Promise.all([
        import('../subnet/kube/kube-manager.js'),
        import('../kube/kube-client.js'),
        import('../kube/kube-access.js'),
      ]);
      const netConf = await readFile(flags['net-config-path'], 'utf8').catch((err: unknown) => {
        throw new WeftError(ErrorCodes.CONFIG, `cannot read --net-config-path ${flags['net-config-path']}: ${errorMessage(err)}`, { cause: err });
      });
      const env = this.#env;
      const access = await loadKubeAccess({
        ...(flags['kubeconfig-file'] ? { kubeconfigFile: flags['kubeconfig-file'] } : {}),
        ...(flags['kube-api-url'] ? { apiUrl: flags['kube-api-url'] } : {}),
        ...(env['KUBERNETES_SERVICE_HOST'] ? { serviceHost: env['KUBERNETES_SERVICE_HOST'] } : {}),
        ...(env['KUBERNETES_SERVICE_PORT'] ? { servicePort: env['KUBERNETES_SERVICE_PORT'] } : {}),
      });
      log.info({ server: access.server.origin, from: access.source, auth: access.auth.kind }, 'using the Kubernetes API');
      this.#apiServer = access.server.origin;
      // An idle connection is PINGed once per health-check interval, so /healthz can vouch for the
      // watch without asking the API server anything.
      const client = new KubeClient({ access, log: this.#log.child({ component: 'kube' }), userAgent: `weft/${version} (linux/${process.arch}) kubernetes`, pingIntervalMs: this.#checkMs });
      const manager = new KubeManager({
        client,
        netConf,
        annotationPrefix: flags['kube-annotation-prefix'],
        log,
        ...(env['NODE_NAME'] ? { nodeName: env['NODE_NAME'] } : {}),
        ...(env['POD_NAME'] ? { podName: env['POD_NAME'] } : {}),
        ...(env['POD_NAMESPACE'] ? { podNamespace: env['POD_NAMESPACE'] } : {}),
      });
      return {
        manager,
        close: () => client.close(),
        background: (signal: AbortSignal) => manager.run(signal),
        nodePublicIps: (signal: AbortSignal) => manager.nodePublicIps(signal),
        ...(flags['set-node-network-unavailable'] ? { networkUp: (signal: AbortSignal) => manager.networkUp(signal) } : {}),
      };
    }
    const [{ connectEtcd }, { LocalManager }] = await Promise.all([import('./etcd-connect.js'), import('../subnet/local-manager.js')]);
    const { gateway, registry } = await connectEtcd(flags, this.#log);
    const previous = await readSubnetEnv(flags['subnet-file']);
    for (const problem of previous.problems) this.#log.warn({ file: flags['subnet-file'] }, `subnet file: ${problem}`);
    const manager = new LocalManager({
      registry,
      log,
      renewMarginMs: flags['subnet-lease-renew-margin'] * 60_000,
      checkConfig: checkBackend,
      ...(previous.subnet || previous.ipv6Subnet ? { previous: { ...(previous.subnet ? { ipv4: previous.subnet } : {}), ...(previous.ipv6Subnet ? { ipv6: previous.ipv6Subnet } : {}) } } : {}),
    });
    return { manager, close: () => gateway.close() };
  }

  /** iptables, or nftables when the network config sets EnableNFTables (flannel 0.28). */
  async #trafficManager(config: NetworkConfig): Promise<TrafficManager> {
    const flags = this.#flags;
    const options = {
      log: this.#log.child({ component: config.enableNFTables ? 'nftables' : 'iptables' }),
      resyncMs: flags['iptables-resync'] * 1000,
      rules: { masquerade: flags['ip-masq'], forward: flags['iptables-forward-rules'], randomFully: !flags['ip-masq-fully-random-disable'] },
    };
    return config.enableNFTables ? Nftables.create(options) : new Iptables(options);
  }

  async #writeSubnetFile(config: NetworkConfig, lease: Lease, network: Network): Promise<void> {
    await writeSubnetEnv(this.#flags['subnet-file'], {
      ...(config.enableIPv4 && config.network ? { network: config.network } : {}),
      ...(config.enableIPv4 && lease.subnet.ipv4 ? { subnet: lease.subnet.ipv4 } : {}),
      ...(config.enableIPv6 && config.ipv6Network && lease.subnet.ipv6 ? { ipv6Network: config.ipv6Network, ipv6Subnet: lease.subnet.ipv6 } : {}),
      mtu: network.mtu,
      ipMasq: this.#flags['ip-masq'],
    });
    this.#log.info({ file: this.#flags['subnet-file'], subnet: formatSubnetPair(lease.subnet) }, 'subnet file written');
  }

  /** Every interval: does the registry still hold our lease, and when did it last say so? */
  async #checkHealth(manager: SubnetManager, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const check = await manager.checkLease(AbortSignal.any([signal, AbortSignal.timeout(this.#checkMs)]));
        this.#leaseOk = check.held;
        publish('lease', { held: check.held, ...(this.#leaseExpiresAt !== undefined ? { expiresAt: this.#leaseExpiresAt } : {}) });
        this.#lastContact = check.confirmedAt;
        this.#lastProblem = this.#leaseOk ? '' : 'the registry does not hold this node\'s lease';
      } catch (err) {
        if (signal.aborted) return;
        this.#lastProblem = `registry unreachable: ${errorMessage(err)}`;
      }
      try {
        await delay(this.#checkMs, signal);
      } catch {
        return;
      }
    }
  }

  /** The report `weft status` prints, from what the agent holds in memory: no request is made. */
  #status(): StatusReport {
    const flags = this.#flags;
    const kube = flags['kube-subnet-mgr'];
    const health = this.#health();
    const lease = this.#lease;
    const packets = this.#network?.packetCounters();
    return {
      version,
      registry: {
        kind: kube ? 'kubernetes' : 'etcd',
        endpoints: kube ? [this.#apiServer ?? flags['kube-api-url']].filter(Boolean) : flags['etcd-endpoints'].split(',').map((e) => e.trim()).filter(Boolean),
        healthy: health.healthy,
        reason: health.reason,
        ...(this.#lastContact ? { lastContact: this.#lastContact } : {}),
      },
      ...(lease
        ? {
            lease: {
              subnets: formatSubnetPair(lease.subnet),
              ...(lease.attrs.publicIp ? { publicIp: formatIp(lease.attrs.publicIp) } : {}),
              ...(lease.attrs.publicIpv6 ? { publicIpv6: formatIp(lease.attrs.publicIpv6) } : {}),
              backend: this.#backendType,
              ...(this.#leaseExpiresAt !== undefined ? { expiresAt: this.#leaseExpiresAt } : {}),
            },
          }
        : {}),
      ...(this.#iface ? { iface: { name: this.#iface.name, mtu: this.#iface.mtu } } : {}),
      ...(this.#network ? { mtu: this.#network.mtu } : {}),
      ...(this.#trafficMode ? { trafficMode: this.#trafficMode } : {}),
      peers: this.#network?.peers() ?? [],
      ...(packets ? { packets } : {}),
    };
  }

  #health(): { healthy: boolean; reason: string; ready: boolean; details: Record<string, unknown> } {
    const age = this.#lastContact ? Date.now() - this.#lastContact : Infinity;
    const details = {
      subnet: this.#lease ? formatSubnetPair(this.#lease.subnet) : null,
      lastRegistryContactMs: Number.isFinite(age) ? age : null,
    };
    if (!this.#lease) return { healthy: false, reason: 'no lease yet', ready: this.#ready, details };
    if (age > 3 * this.#checkMs) return { healthy: false, reason: this.#lastProblem || 'no recent registry contact', ready: this.#ready, details };
    if (!this.#leaseOk) return { healthy: false, reason: this.#lastProblem, ready: this.#ready, details };
    return { healthy: true, reason: 'lease held', ready: this.#ready, details };
  }
}
