/**
 * The Kubernetes subnet manager (flannel-compat §6): the API server is the registry and each
 * Node's spec.podCIDR(s) is its lease. Everything it knows comes from one informer of Nodes
 * (kube/informer.ts; one list and one watch for the whole agent): this node's podCIDR and
 * annotations, the peers, and the health check's confirmation. Its only requests of its own are
 * one GET of this Node at start (read beside the list, so that the lease and what precedes it do
 * not wait for every Node), the strategic-merge patches of this node's status (annotations,
 * NetworkUnavailable), each retried with backoff until it lands, and, without NODE_NAME, one GET
 * of the agent's own Pod. Annotations of other nodes are
 * untrusted input. With the alloc backend, as flannel (pkg/subnet/kube/kube.go, disableNodeInformer),
 * there is no informer: the agent GETs its own Node until it has a podCIDR, and reads no other.
 */
import { untilAborted } from '../../core/abort.js';
import { publish } from '../../core/events.js';
import { Values } from '../../core/values.js';
import { Backoff, type BackoffOptions } from '../../core/backoff.js';
import { type Clock, systemClock } from '../../core/clock.js';
import { ErrorCodes, WeftError, isRetriable, retryAfterMs } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { type NetworkConfig, parseNetworkConfig } from '../../config/network-config.js';
import { containsCidr, formatCidr } from '../../ip/cidr.js';
import type { IpAddr } from '../../ip/ip.js';
import { type Lease, type LeaseAttrs, type LeaseEvent, type SubnetPair, formatSubnetPair, leaseAttrsEqual, subnetPairEquals } from '../../lease/lease.js';
import type { LeaseCheck, SubnetManager } from '../subnet-manager.js';
import { type AnnotationNames, type NodeRecord, NodeRecords, annotationNames, nodeLease, normalizePrefix, ownAnnotations, podCidrs } from './annotations.js';
import { type KubeClient, KubeApiError } from '../../kube/kube-client.js';
import { Informer, type InformerOptions } from '../../kube/informer.js';

/** The Nodes collection, and a node's status subresource: the only write flannel's ClusterRole allows. */
const nodesPath = '/api/v1/nodes';
const nodeStatusPath = (name: string): string => `${nodesPath}/${encodeURIComponent(name)}/status`;

export interface KubeManagerOptions {
  /** The agent's one client (one connection), shared with whatever else reads the API. */
  readonly client: Pick<KubeClient, 'list' | 'watch' | 'lastAlive' | 'get' | 'patch'>;
  /** NODE_NAME, or found from POD_NAME and POD_NAMESPACE. */
  readonly nodeName?: string;
  readonly podName?: string;
  readonly podNamespace?: string;
  /** net-conf.json text. */
  readonly netConf: string;
  readonly annotationPrefix: string;
  readonly log: Logger;
  /** Informer settings (tests shorten them). */
  readonly informer?: Pick<InformerOptions<NodeRecord>, 'pageSize' | 'backoff' | 'watchTimeoutSeconds'>;
  /** Backoff of the patch retries; default 1 s doubling to 30 s. */
  readonly retry?: BackoffOptions;
  readonly clock?: Clock;
}

export class KubeManager implements SubnetManager {
  readonly #options: KubeManagerOptions;
  readonly #client: KubeManagerOptions['client'];
  readonly #names: AnnotationNames;
  readonly #informer: Informer<NodeRecord>;
  readonly #decoder: NodeRecords;
  /** The alloc backend's mode: no informer; `#own` is this Node as last read or patched. */
  readonly #direct: boolean;
  #own: NodeRecord | undefined;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #warned = new Map<string, string>();
  #nodeName: Promise<string> | undefined;
  #config: NetworkConfig | undefined;
  #attrs: LeaseAttrs | undefined;
  #lease: Lease | undefined;
  /** When the lease was taken (the patch's answer, or the read that showed nothing to patch). */
  #leasedAt = 0;
  /** This Node from the one GET made while the informer lists (#earlyOwn). */
  #early: Promise<NodeRecord | undefined> | undefined;

  constructor(options: KubeManagerOptions) {
    this.#options = options;
    this.#client = options.client;
    const prefix = normalizePrefix(options.annotationPrefix);
    this.#names = annotationNames(prefix);
    this.#log = options.log;
    this.#clock = options.clock ?? systemClock;
    this.#decoder = new NodeRecords(prefix);
    this.#informer = new Informer({ api: options.client, path: nodesPath, decoder: this.#decoder, what: 'node', log: options.log, clock: this.#clock, ...options.informer });
    this.#direct = backendTypeOf(options.netConf) === 'alloc';
    if (options.nodeName) this.#nodeName = Promise.resolve(options.nodeName);
  }

  /** Runs the Node informer until `signal` aborts; everything else reads it. (alloc: none.) */
  run(signal: AbortSignal): Promise<void> {
    if (this.#direct) return untilAborted(signal);
    // This Node's GET goes out before the list: on the one connection, its answer would otherwise
    // come behind a page of 500 Nodes.
    if (this.#options.nodeName) void this.#earlyOwn(this.#options.nodeName, signal);
    return this.#informer.run(signal);
  }

  async getNetworkConfig(): Promise<NetworkConfig> {
    const config = parseNetworkConfig(this.#options.netConf, 'kube');
    for (const w of config.warnings) this.#log.warn({}, w);
    this.#config = config;
    return config;
  }

  async acquireLease(attrs: LeaseAttrs, signal: AbortSignal): Promise<Lease> {
    const config = this.#config ?? (await this.getNetworkConfig());
    const name = await this.#ownName(signal);
    // This Node as one GET read it while every Node is being listed (flanneld waits for its
    // informer's list; 5000 Nodes take most of a second): the lease need not wait for the peers.
    if (!this.#direct && !this.#informer.synced) {
      const own = await this.#beforeList(name, signal);
      const lease = own ? await this.#leaseFrom(config, name, own, attrs, signal) : undefined;
      if (lease) return lease;
    }
    let waiting = '';
    for await (const batch of this.#ownNodeChanges(name, signal)) {
      if (waiting && !batch.some((c) => c.record.name === name)) continue;
      const node = this.#node(name);
      const lease = node ? await this.#leaseFrom(config, name, node, attrs, signal) : undefined;
      if (lease) return lease;
      const why = node ? `waiting for node "${name}" to be assigned a podCIDR` : `waiting for node "${name}" to be registered`;
      if (why !== waiting) this.#log.warn({ node: name }, why);
      waiting = why;
    }
    throw signal.reason;
  }

  /** The lease `node` (this one, as read) gives, its annotations published; undefined while it has no podCIDR. */
  async #leaseFrom(config: NetworkConfig, name: string, node: NodeRecord, attrs: LeaseAttrs, signal: AbortSignal): Promise<Lease | undefined> {
    const subnet = ownSubnets(config, node);
    if (!subnet) return undefined;
    if ('problem' in subnet) throw new WeftError(ErrorCodes.CONFIG, `node "${name}" ${subnet.problem}`);
    for (const [cidr, network] of [[subnet.ipv4, config.network], [subnet.ipv6, config.ipv6Network]] as const) {
      if (cidr && network && !containsCidr(network, cidr)) {
        throw new WeftError(ErrorCodes.CONFIG, `subnet "${formatCidr(network)}" specified in the flannel net config doesn't contain "${formatCidr(cidr)}" PodCIDR of the "${name}" node`);
      }
    }
    const published = await this.#publish(name, attrs, signal, node);
    this.#attrs = attrs;
    this.#lease = this.#ownLease(published, subnet, attrs);
    this.#leasedAt = this.#clock.now();
    this.#log.info({ node: name, subnet: formatSubnetPair(subnet) }, 'lease acquired from the node\'s podCIDR');
    publish('lease', { held: true });
    return this.#lease;
  }

  /**
   * Keeps this node's annotations as published (publishing them again when someone changes
   * them) and yields the lease when the node's podCIDR changes.
   */
  async *holdLease(signal: AbortSignal): AsyncGenerator<Lease> {
    // alloc: flannel watches nothing once the lease is taken, and neither does weft.
    if (this.#direct) return untilAborted(signal);
    const name = await this.#ownName(signal);
    const config = this.#config ?? (await this.getNetworkConfig());
    // Each batch let go once read (core/values.ts): the first is every Node, and this generator
    // waits for as long as this node's record is quiet.
    const batches = new Values(this.#informer.changes(signal));
    try {
      for (;;) {
        let batch = await batches.next();
        if (!batch) return;
        const ours = batch.some((c) => c.record.name === name);
        batch = undefined;
        if (!this.#attrs || !this.#lease || !ours) continue;
        const node = this.#informer.get(name);
        if (!node) {
          this.#log.warn({ node: name }, `node "${name}" was deleted; keeping its lease until it is back`);
          continue;
        }
        const subnet = ownSubnets(config, node);
        if (subnet && !('problem' in subnet) && !subnetPairEquals(subnet, this.#lease.subnet)) {
          this.#log.warn({ node: name, subnet: formatSubnetPair(subnet) }, 'the node\'s podCIDR changed');
          this.#lease = this.#ownLease(await this.#publish(name, this.#attrs, signal), subnet, this.#attrs);
          yield this.#lease;
          continue;
        }
        if (this.#drifted(node, this.#attrs)) {
          this.#log.warn({ node: name }, 'this node\'s annotations were changed; publishing them again');
          await this.#publish(name, this.#attrs, signal);
        }
      }
    } finally {
      await batches.close();
    }
  }

  async *watchLeases(signal: AbortSignal): AsyncGenerator<LeaseEvent[]> {
    if (this.#direct) {
      // No informer, so no peers: one empty first batch, then nothing.
      yield [];
      return untilAborted(signal);
    }
    const config = this.#config ?? (await this.getNetworkConfig());
    const own = await this.#ownName(signal);
    const byNode = new Map<string, Lease>();
    const set = (name: string, node: NodeRecord | undefined, out: LeaseEvent[]): void => {
      const old = byNode.get(name);
      const lease = node && name !== own ? this.#peerLease(node, config) : undefined;
      if (old && (!lease || !subnetPairEquals(old.subnet, lease.subnet))) {
        byNode.delete(name);
        out.push({ type: 'removed', lease: old });
      }
      if (lease && (!old || !subnetPairEquals(old.subnet, lease.subnet) || !leaseAttrsEqual(old.attrs, lease.attrs))) {
        byNode.set(name, lease);
        out.push({ type: 'added', lease });
      }
    };
    // Each batch let go once handed on (core/values.ts): the first is every Node.
    const batches = new Values(this.#informer.changes(signal));
    try {
      for (let first = true; ; first = false) {
        let batch = await batches.next();
        if (!batch) return;
        let out: LeaseEvent[] | undefined = [];
        for (const c of batch) set(c.record.name, c.type === 'put' ? c.record : undefined, out);
        batch = undefined;
        if (first || out.length > 0) yield out;
        out = undefined;
      }
    } finally {
      await batches.close();
    }
  }

  /**
   * The `node-public-ip` and `node-public-ipv6` annotations of this node (flannel 0.28, spec §9.3):
   * an operator's choice of public addresses, which replaces `--public-ip(v6)`. Empty when unset.
   */
  async nodePublicIps(signal: AbortSignal): Promise<{ publicIp: string; publicIpv6: string }> {
    const name = await this.#ownName(signal);
    const a = (await this.#synced(name, signal))?.annotations ?? {};
    return { publicIp: a[this.#names.nodePublicIp] ?? '', publicIpv6: a[this.#names.nodePublicIpv6] ?? '' };
  }

  /** The backend data this Node carries from an earlier run (flannel 0.28 reuses its VtepMAC). */
  async previousAttrs(publicIp: IpAddr, signal: AbortSignal): Promise<LeaseAttrs | undefined> {
    const name = await this.#ownName(signal);
    const a = (await this.#synced(name, signal))?.annotations ?? {};
    const usable = (v: string | undefined): v is string => v !== undefined && v !== '' && v !== 'null';
    const backendData = a[this.#names.backendData];
    const backendV6Data = a[this.#names.backendV6Data];
    const backendType = a[this.#names.backendType];
    if (!usable(backendData) && !usable(backendV6Data) && !usable(backendType)) return undefined;
    return {
      publicIp: publicIp.family === 4 ? publicIp : { family: 4, value: 0n },
      // Which devices were this agent's (a udp node's flannel0 has no backend data).
      ...(usable(backendType) ? { backendType } : {}),
      ...(usable(backendData) ? { backendData } : {}),
      ...(usable(backendV6Data) ? { backendV6Data } : {}),
    };
  }

  /** From the informer's cache: no request. (alloc: the lease as taken, confirmed by the connection's liveness.) */
  async checkLease(): Promise<LeaseCheck> {
    if (this.#direct) return { held: this.#lease !== undefined, confirmedAt: this.#client.lastAlive() };
    // Until the first list is in, the GET and the patch that gave the lease are the last word.
    if (!this.#informer.synced && this.#lease) return { held: true, confirmedAt: this.#leasedAt };
    const confirmedAt = this.#informer.contactAt();
    const name = this.#nodeName ? await this.#nodeName : undefined;
    const node = name ? this.#informer.get(name) : undefined;
    if (!node || !this.#attrs || !this.#lease || !this.#config) return { held: false, confirmedAt };
    const subnet = ownSubnets(this.#config, node);
    const held = subnet !== undefined && !('problem' in subnet) && subnetPairEquals(subnet, this.#lease.subnet) && !this.#drifted(node, this.#attrs);
    return { held, confirmedAt };
  }

  /** NodeNetworkUnavailable=False, reason FlannelIsUp, once the network is up (spec §6.5); retried until it lands. */
  async networkUp(signal: AbortSignal): Promise<void> {
    const name = await this.#ownName(signal);
    // Not before the peers are known, as with flanneld, which takes its lease only once its
    // informer has listed every Node: here the lease may come first.
    if (!this.#direct) await this.#informer.whenSynced(signal);
    const now = new Date(this.#clock.now()).toISOString();
    const patch = {
      status: { conditions: [{ type: 'NetworkUnavailable', status: 'False', reason: 'FlannelIsUp', message: 'Flannel is running on this node', lastTransitionTime: now, lastHeartbeatTime: now }] },
    };
    await this.#patch(name, patch, 'NetworkUnavailable=False', signal);
  }

  /** Whether the node's annotations differ from what publishing `attrs` makes them. */
  #drifted(node: NodeRecord, attrs: LeaseAttrs): boolean {
    return Object.keys(ownAnnotations(this.#names, attrs, node.annotations)).length > 0;
  }

  #ownLease(published: NodeRecord | undefined, subnet: SubnetPair, attrs: LeaseAttrs): Lease {
    const lease = published && this.#config ? nodeLease(published, this.#names, this.#config) : undefined;
    return lease && !('problem' in lease) ? { subnet, attrs: lease.attrs } : { subnet, attrs };
  }

  /** A Node as a lease when its annotations decode; what it holds is judged by the backend's peer check. */
  #peerLease(node: NodeRecord, config: NetworkConfig): Lease | undefined {
    const name = node.name;
    const result = nodeLease(node, this.#names, config);
    const problem = result && 'problem' in result ? result.problem : undefined;
    if (problem) {
      if (this.#warned.get(name) !== problem) this.#log.warn({ node: name }, `skipping node "${name}": ${problem}`);
      this.#warned.set(name, problem);
      return undefined;
    }
    this.#warned.delete(name);
    return result && !('problem' in result) ? result : undefined;
  }

  /** Publishes `attrs` as the node's annotations if they differ from `current`'s (default: the cache's); the Node as it is then. */
  async #publish(name: string, attrs: LeaseAttrs, signal: AbortSignal, current = this.#node(name)): Promise<NodeRecord | undefined> {
    const changed = ownAnnotations(this.#names, attrs, current?.annotations ?? {});
    if (Object.keys(changed).length === 0) return current;
    const answer = await this.#patch(name, { metadata: { annotations: changed } }, 'node annotations', signal);
    this.#log.info({ node: name, annotations: Object.keys(changed) }, 'node annotations published');
    if (this.#direct) return (this.#own = this.#decoder.record(answer) ?? current);
    return this.#informer.observe(answer) ?? current;
  }

  /** A status patch, retried until it lands or `signal` aborts. */
  #patch(name: string, patch: Record<string, unknown>, what: string, signal: AbortSignal): Promise<unknown> {
    return this.#retry(
      () => this.#client.patch(nodeStatusPath(name), patch, { contentType: 'application/strategic-merge-patch+json', signal }),
      { node: name },
      `patch ${what} of node "${name}"`,
      signal,
    );
  }

  /**
   * `attempt` until it succeeds or `signal` aborts: each failure logged once (`could not <what>`)
   * and followed by the server's Retry-After, else a backoff of 1 s doubling to 30 s.
   */
  async #retry<T>(attempt: () => Promise<T>, fields: Record<string, unknown>, what: string, signal: AbortSignal): Promise<T> {
    const backoff = new Backoff({ initialMs: 1000, maxMs: 30_000, ...this.#options.retry });
    for (let tries = 1; ; tries++) {
      try {
        const result = await attempt();
        if (tries > 1) this.#log.info({ ...fields, attempts: tries }, `${what}: done`);
        return result;
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (!isRetriable(err)) throw err;
        const waitMs = retryAfterMs(err) ?? backoff.next();
        this.#log.warn({ err, ...fields, retryMs: waitMs }, `could not ${what}; retrying`);
        await this.#clock.sleep(waitMs, signal);
      }
    }
  }

  /** This Node as the informer's cache (or, for alloc, the last GET or patch) has it. */
  #node(name: string): NodeRecord | undefined {
    return this.#direct ? this.#own : this.#informer.get(name);
  }

  /** This Node once it has been read: by the early GET, or the informer's list; (alloc) one GET made. */
  async #synced(name: string, signal: AbortSignal): Promise<NodeRecord | undefined> {
    if (!this.#direct) {
      const own = this.#informer.synced ? undefined : await this.#beforeList(name, signal);
      if (own) return own;
      await this.#informer.whenSynced(signal);
      return this.#informer.get(name);
    }
    if (!this.#own) await this.#fetch(name, signal);
    return this.#own;
  }

  /**
   * This Node from one GET, made once, beside the informer's list: undefined when it does not
   * exist yet or the GET failed (the list then has the last word, and its own retries).
   */
  #earlyOwn(name: string, signal: AbortSignal): Promise<NodeRecord | undefined> {
    this.#early ??= this.#client.get(`${nodesPath}/${encodeURIComponent(name)}`, signal).then(
      (raw) => this.#decoder.record(raw),
      (err: unknown) => {
        if (!signal.aborted && !(err instanceof KubeApiError && err.status === 404)) this.#log.warn({ err, node: name }, `could not read node "${name}"; waiting for the list of every node`);
        return undefined;
      },
    );
    return this.#early;
  }

  /**
   * This Node as the early GET read it, unless the list is in first (a GET that hangs until its
   * deadline must not hold up what the cache can answer): then undefined, and the cache decides.
   */
  async #beforeList(name: string, signal: AbortSignal): Promise<NodeRecord | undefined> {
    const own = await Promise.race([this.#earlyOwn(name, signal), this.#informer.whenSynced(signal).then(() => undefined)]);
    return this.#informer.synced ? undefined : own;
  }

  /** One GET of this Node; undefined while it does not exist. */
  async #fetch(name: string, signal: AbortSignal): Promise<NodeRecord | undefined> {
    const raw = await this.#retry(
      () => this.#client.get(`${nodesPath}/${encodeURIComponent(name)}`, signal).catch((err: unknown) => {
        if (err instanceof KubeApiError && err.status === 404) return undefined;
        throw err;
      }),
      { node: name },
      `read node "${name}"`,
      signal,
    );
    this.#own = raw === undefined ? undefined : this.#decoder.record(raw);
    return this.#own;
  }

  /**
   * The informer's changes that may concern this Node; for alloc, a GET of it every few seconds
   * (3 s, as flannel polls, growing to 30 s while the wait lasts), each reported as a change.
   */
  async *#ownNodeChanges(name: string, signal: AbortSignal): AsyncGenerator<ReadonlyArray<{ readonly record: { readonly name: string } }>> {
    if (!this.#direct) {
      yield* this.#informer.changes(signal);
      return;
    }
    const backoff = new Backoff({ initialMs: 3000, maxMs: 30_000 });
    for (;;) {
      await this.#fetch(name, signal);
      yield [{ record: { name } }];
      await this.#clock.sleep(backoff.next(), signal);
    }
  }

  /** This node's name: NODE_NAME, or the agent's own Pod's spec.nodeName. */
  nodeName(signal: AbortSignal): Promise<string> {
    return this.#ownName(signal);
  }

  #ownName(signal: AbortSignal): Promise<string> {
    this.#nodeName ??= this.#findNodeName(signal);
    return this.#nodeName;
  }

  /** flanneld without NODE_NAME: GET the agent's own Pod for spec.nodeName, retried while the API fails. */
  async #findNodeName(signal: AbortSignal): Promise<string> {
    const { podName, podNamespace } = this.#options;
    if (!podName || !podNamespace) throw new WeftError(ErrorCodes.CONFIG, 'env variables POD_NAME and POD_NAMESPACE must be set (or NODE_NAME)');
    const pod = `${podNamespace}/${podName}`;
    return this.#retry(
      async () => {
        const spec = (await this.#client.get(`/api/v1/namespaces/${encodeURIComponent(podNamespace)}/pods/${encodeURIComponent(podName)}`, signal))['spec'];
        const nodeName = typeof spec === 'object' && spec !== null ? (spec as Record<string, unknown>)['nodeName'] : undefined;
        if (typeof nodeName !== 'string' || nodeName === '') throw new WeftError(ErrorCodes.CONFIG, `pod ${pod} has no spec.nodeName`);
        return nodeName;
      },
      { pod },
      'read this agent\'s pod to find its node',
      signal,
    );
  }
}

/** The subnets the config asks for out of the node's pod CIDRs: undefined while one is missing, or why they are unusable. */
function ownSubnets(config: NetworkConfig, node: NodeRecord): SubnetPair | { problem: string } | undefined {
  const cidrs = podCidrs(node);
  if ('problem' in cidrs) return cidrs;
  // Wait until every enabled family has its CIDR (a dual-stack node may get its second later).
  if ((config.enableIPv4 && !cidrs.ipv4) || (config.enableIPv6 && !cidrs.ipv6)) return undefined;
  return { ...(config.enableIPv4 && cidrs.ipv4 ? { ipv4: cidrs.ipv4 } : {}), ...(config.enableIPv6 && cidrs.ipv6 ? { ipv6: cidrs.ipv6 } : {}) };
}


/** The net-conf's Backend.Type, or undefined when it does not parse (getNetworkConfig says why). */
function backendTypeOf(netConf: string): string | undefined {
  try {
    return parseNetworkConfig(netConf, 'kube').backend.type;
  } catch {
    return undefined;
  }
}
