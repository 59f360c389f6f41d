/**
 * The Kubernetes subnet manager (flannel-compat §6): the API server is the registry and each
 * Node's spec.podCIDR(s) is its lease. This node publishes its attributes as annotations (through
 * the nodes/status subresource, as flanneld with its ClusterRole), other nodes come from a
 * list+watch that never misses a change: a 410 Gone or a broken watch leads to a re-list whose
 * difference becomes events. Annotations of other nodes are untrusted input.
 */
import { CoreV1Api, KubeConfig, PatchStrategy, Watch, setHeaderOptions } from '@kubernetes/client-node';
import type { V1Node } from '@kubernetes/client-node';
import { AsyncQueue } from '../../core/async-queue.js';
import { delay } from '../../core/abort.js';
import { Backoff } from '../../core/backoff.js';
import { ErrorCodes, WeftError, errorMessage } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { type NetworkConfig, parseNetworkConfig } from '../../config/network-config.js';
import { containsCidr, formatCidr } from '../../ip/cidr.js';
import type { IpAddr } from '../../ip/ip.js';
import { type Lease, type LeaseAttrs, type LeaseEvent, formatSubnetPair, leaseAttrsEqual, subnetPairEquals } from '../../lease/lease.js';
import type { SubnetManager } from '../subnet-manager.js';
import { type AnnotationNames, annotationNames, nodeLease, normalizePrefix, ownAnnotations, podCidrs } from './annotations.js';

export interface KubeManagerOptions {
  /** API access: a kubeconfig file, an API URL, both, or neither (in-cluster). */
  readonly kubeconfigFile?: string;
  readonly apiUrl?: string;
  /** Already-built configuration (tests). */
  readonly kubeConfig?: KubeConfig;
  /** NODE_NAME, or found from POD_NAME and POD_NAMESPACE. */
  readonly nodeName?: string;
  readonly podName?: string;
  readonly podNamespace?: string;
  /** net-conf.json text. */
  readonly netConf: string;
  readonly annotationPrefix: string;
  readonly log: Logger;
  /** How often acquisition re-reads a Node that has no podCIDR yet. Default 1 s. */
  readonly pollMs?: number;
}

type NodeChange = { readonly reset: readonly V1Node[] } | { readonly put: V1Node } | { readonly deleted: V1Node };

export function kubeConfigFrom(options: { kubeconfigFile?: string; apiUrl?: string }): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfigFile) kc.loadFromFile(options.kubeconfigFile);
  else if (options.apiUrl) kc.loadFromClusterAndUser({ name: 'weft', server: options.apiUrl, skipTLSVerify: false }, { name: 'weft' });
  else kc.loadFromCluster();
  if (options.kubeconfigFile && options.apiUrl) {
    const cluster = kc.getCurrentCluster();
    if (cluster) kc.clusters = kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server: options.apiUrl! } : c));
  }
  return kc;
}

export class KubeManager implements SubnetManager {
  readonly #kc: KubeConfig;
  readonly #core: CoreV1Api;
  readonly #options: KubeManagerOptions;
  readonly #names: AnnotationNames;
  readonly #log: Logger;
  readonly #warned = new Map<string, string>();
  #nodeName: string | undefined;
  #config: NetworkConfig | undefined;
  #attrs: LeaseAttrs | undefined;
  #lease: Lease | undefined;

  constructor(options: KubeManagerOptions) {
    this.#options = options;
    this.#kc = options.kubeConfig ?? kubeConfigFrom({ ...(options.kubeconfigFile ? { kubeconfigFile: options.kubeconfigFile } : {}), ...(options.apiUrl ? { apiUrl: options.apiUrl } : {}) });
    this.#core = this.#kc.makeApiClient(CoreV1Api);
    this.#names = annotationNames(normalizePrefix(options.annotationPrefix));
    this.#log = options.log;
    this.#nodeName = options.nodeName;
  }


  async getNetworkConfig(): Promise<NetworkConfig> {
    const config = parseNetworkConfig(this.#options.netConf, 'kube');
    for (const w of config.warnings) this.#log.warn({}, w);
    this.#config = config;
    return config;
  }

  async acquireLease(attrs: LeaseAttrs, signal: AbortSignal): Promise<Lease> {
    const config = this.#config ?? (await this.getNetworkConfig());
    const name = await this.#ownName();
    let waiting = false;
    for (;;) {
      const node = await this.#core.readNode({ name });
      const cidrs = podCidrs(node);
      if ('problem' in cidrs) throw new WeftError(ErrorCodes.CONFIG, `node "${name}" ${cidrs.problem}`);
      if ((config.enableIPv4 && cidrs.ipv4) || (!config.enableIPv4 && cidrs.ipv6)) {
        if (config.enableIPv4 && config.network && !containsCidr(config.network, cidrs.ipv4!)) {
          throw new WeftError(ErrorCodes.CONFIG, `subnet "${formatCidr(config.network)}" specified in the flannel net config doesn't contain "${formatCidr(cidrs.ipv4!)}" PodCIDR of the "${name}" node`);
        }
        await this.#publish(node, attrs);
        const subnet = { ...(config.enableIPv4 && cidrs.ipv4 ? { ipv4: cidrs.ipv4 } : {}), ...(config.enableIPv6 && cidrs.ipv6 ? { ipv6: cidrs.ipv6 } : {}) };
        const published = await this.#core.readNode({ name });
        const lease = nodeLease(published, this.#names, config);
        this.#attrs = attrs;
        this.#lease = lease && !('problem' in lease) ? lease : { subnet, attrs };
        this.#log.info({ node: name, subnet: formatSubnetPair(this.#lease.subnet) }, 'lease acquired from the node\'s podCIDR');
        return this.#lease;
      }
      if (!waiting) this.#log.warn({ node: name }, `waiting for node "${name}" to be assigned a podCIDR`);
      waiting = true;
      await delay(this.#options.pollMs ?? 1000, signal);
    }
  }

  /** Keeps this node's annotations as published; yields the lease when the podCIDR changes. */
  async *holdLease(signal: AbortSignal): AsyncGenerator<Lease> {
    const name = await this.#ownName();
    for await (const change of this.#nodeChanges(signal)) {
      const node = 'reset' in change ? change.reset.find((n) => n.metadata?.name === name) : 'put' in change && change.put.metadata?.name === name ? change.put : undefined;
      if (!node || !this.#attrs || !this.#lease) continue;
      const cidrs = podCidrs(node);
      if (!('problem' in cidrs) && cidrs.ipv4 && this.#lease.subnet.ipv4 && formatCidr(cidrs.ipv4) !== formatCidr(this.#lease.subnet.ipv4)) {
        this.#lease = { subnet: { ipv4: cidrs.ipv4, ...(cidrs.ipv6 ? { ipv6: cidrs.ipv6 } : {}) }, attrs: this.#attrs };
        this.#log.warn({ node: name, subnet: formatSubnetPair(this.#lease.subnet) }, 'the node\'s podCIDR changed');
        await this.#publish(node, this.#attrs).catch((err: unknown) => this.#log.error({ err }, 'could not publish annotations'));
        yield this.#lease;
        continue;
      }
      if (Object.keys(ownAnnotations(this.#names, this.#attrs, node.metadata?.annotations ?? {})).length > 0) {
        this.#log.warn({ node: name }, 'this node\'s annotations were changed; publishing them again');
        await this.#publish(node, this.#attrs).catch((err: unknown) => this.#log.error({ err }, 'could not publish annotations'));
      }
    }
  }

  async *watchLeases(signal: AbortSignal): AsyncGenerator<LeaseEvent[]> {
    const config = this.#config ?? (await this.getNetworkConfig());
    const own = await this.#ownName();
    const byNode = new Map<string, Lease>();
    let first = true;
    const set = (name: string, node: V1Node | undefined, out: LeaseEvent[]): void => {
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
    for await (const change of this.#nodeChanges(signal)) {
      const out: LeaseEvent[] = [];
      if ('reset' in change) {
        const seen = new Set<string>();
        for (const node of change.reset) {
          const name = node.metadata?.name ?? '';
          seen.add(name);
          set(name, node, out);
        }
        for (const name of [...byNode.keys()]) if (!seen.has(name)) set(name, undefined, out);
      } else if ('put' in change) set(change.put.metadata?.name ?? '', change.put, out);
      else set(change.deleted.metadata?.name ?? '', undefined, out);
      if (first || out.length > 0) yield out;
      first = false;
    }
  }

  /** The backend data this Node carries from an earlier run (flannel 0.28 reuses its VtepMAC). */
  async previousAttrs(publicIp: IpAddr): Promise<LeaseAttrs | undefined> {
    const node = await this.#core.readNode({ name: await this.#ownName() });
    const a = node.metadata?.annotations ?? {};
    const data = a[this.#names.backendData];
    return data && data !== 'null' ? { publicIp, backendData: data } : undefined;
  }

  async verifyLease(): Promise<boolean> {
    if (!this.#attrs || !this.#lease) return false;
    const node = await this.#core.readNode({ name: await this.#ownName() });
    return Object.keys(ownAnnotations(this.#names, this.#attrs, node.metadata?.annotations ?? {})).length === 0;
  }

  /** NodeNetworkUnavailable=False, reason FlannelIsUp, once the network is up (spec §6.5). */
  async networkUp(): Promise<void> {
    const now = new Date().toISOString();
    const body = {
      status: { conditions: [{ type: 'NetworkUnavailable', status: 'False', reason: 'FlannelIsUp', message: 'Flannel is running on this node', lastTransitionTime: now, lastHeartbeatTime: now }] },
    };
    await this.#core.patchNodeStatus({ name: await this.#ownName(), body }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
  }

  #peerLease(node: V1Node, config: NetworkConfig): Lease | undefined {
    const name = node.metadata?.name ?? '?';
    const result = nodeLease(node, this.#names, config);
    if (result && 'problem' in result) {
      if (this.#warned.get(name) !== result.problem) {
        this.#warned.set(name, result.problem);
        this.#log.warn({ node: name }, `skipping node "${name}": ${result.problem}`);
      }
      return undefined;
    }
    this.#warned.delete(name);
    if (result?.subnet.ipv4 && config.network && !containsCidr(config.network, result.subnet.ipv4)) {
      this.#log.warn({ node: name }, `skipping node "${name}": its podCIDR is outside the network`);
      return undefined;
    }
    return result;
  }

  async #publish(node: V1Node, attrs: LeaseAttrs): Promise<void> {
    const changed = ownAnnotations(this.#names, attrs, node.metadata?.annotations ?? {});
    if (Object.keys(changed).length === 0) return;
    await this.#core.patchNodeStatus(
      { name: node.metadata?.name ?? '', body: { metadata: { annotations: changed } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    this.#log.info({ node: node.metadata?.name, annotations: Object.keys(changed) }, 'node annotations published');
  }

  async #ownName(): Promise<string> {
    if (this.#nodeName) return this.#nodeName;
    const { podName, podNamespace } = this.#options;
    if (!podName || !podNamespace) throw new WeftError(ErrorCodes.CONFIG, 'env variables POD_NAME and POD_NAMESPACE must be set (or NODE_NAME)');
    const pod = await this.#core.readNamespacedPod({ name: podName, namespace: podNamespace });
    const nodeName = pod.spec?.nodeName;
    if (!nodeName) throw new WeftError(ErrorCodes.CONFIG, `pod ${podNamespace}/${podName} has no spec.nodeName yet`);
    this.#nodeName = nodeName;
    return nodeName;
  }

  /** List, then watch from the list's resourceVersion; re-list after 410 Gone or a failure. */
  async *#nodeChanges(signal: AbortSignal): AsyncGenerator<NodeChange> {
    const backoff = new Backoff();
    const watch = new Watch(this.#kc);
    let rv: string | undefined;
    while (!signal.aborted) {
      try {
        if (rv === undefined) {
          const list = await this.#core.listNode();
          rv = list.metadata?.resourceVersion ?? '0';
          yield { reset: list.items };
        }
        const queue = new AsyncQueue<{ phase: string; obj: unknown } | { done: unknown }>();
        const ctl = await watch.watch(
          '/api/v1/nodes',
          { resourceVersion: rv, allowWatchBookmarks: true },
          (phase, obj) => queue.push({ phase, obj }),
          (err) => queue.push({ done: err }),
        );
        const stop = (): void => ctl.abort();
        signal.addEventListener('abort', stop, { once: true });
        try {
          for (;;) {
            const item = await queue.next(signal);
            if ('done' in item) {
              if (item.done) throw item.done;
              break; // closed by the server: resume from rv
            }
            const obj = item.obj as V1Node & { code?: number; reason?: string; message?: string };
            if (item.phase === 'ERROR') {
              rv = undefined;
              this.#log.info({ code: obj.code, reason: obj.reason }, obj.code === 410 ? 'node watch expired (410 Gone); listing again' : `node watch error: ${obj.message ?? ''}; listing again`);
              break;
            }
            if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
            backoff.reset();
            if (item.phase === 'ADDED' || item.phase === 'MODIFIED') yield { put: obj };
            else if (item.phase === 'DELETED') yield { deleted: obj };
          }
        } finally {
          signal.removeEventListener('abort', stop);
          ctl.abort();
        }
      } catch (err) {
        if (signal.aborted) return;
        rv = undefined;
        const wait = backoff.next();
        this.#log.warn({ err: err instanceof Error ? err : new Error(errorMessage(err)), retryMs: wait }, 'node list/watch failed; listing again');
        try {
          await delay(wait, signal);
        } catch {
          return;
        }
      }
    }
  }
}
