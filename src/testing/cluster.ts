/**
 * An N-node weft cluster in network namespaces, for end-to-end tests:
 * - a switch namespace with bridge br0 (203.0.113.254/24) and a real etcd listening on it;
 * - node namespaces on 203.0.113.0/24, each with eth0 on the bridge, a default route via the
 *   switch, IP forwarding, and a real `weft agent` process;
 * - pods: namespaces attached by weft's CNI plugin, run inside the node's namespace as a runtime
 *   runs it, delegating to the real CNI `bridge` and `host-local` plugins.
 * `destroy()` stops every process it started (by pid) and removes every namespace and file, and
 * the tests call it from t.after so it runs when they fail too.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { delay } from '../core/abort.js';
import { createNetns, deleteNetns, ipJson, nsExec, nsName, sh, spawnInNetns, stopProcess, sweepStaleNamespaces } from './netns.js';
import { parseSubnetEnv } from '../subnet/subnet-env.js';
import { NamespacedApiServer } from './namespaced-apiserver.js';
import { EtcdMembers, type EtcdMembersOptions } from './etcd-members.js';
import { waitUntil } from './wait.js';

export const weftBin = fileURLToPath(new URL('../../../bin/weft', import.meta.url));
/** The host's static CNI plugin (make cni-plugin). */
export const staticCniPlugin = fileURLToPath(new URL('../../cni/flannel', import.meta.url));
const adminScript = fileURLToPath(new URL('./etcd-admin.js', import.meta.url));
export const switchIp = '203.0.113.254';
export const switchIp6 = '2001:db8:113::fe';
const etcdPort = 2379;

export interface Pod {
  readonly ns: string;
  /** The pod's first address (IPv4 in dual-stack). */
  readonly ip: string;
  /** Every address the CNI result gave the pod. */
  readonly ips: readonly string[];
  readonly id: string;
}

export interface ClusterNode {
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  /** The node's IPv6 underlay address, in clusters with `ipv6`. */
  readonly ip6?: string;
  readonly dir: string;
  readonly subnetFile: string;
  agent?: ChildProcess | undefined;
  /** Which agent startAgent last started: a weft node's pods come through the static plugin and the agent's socket. */
  agentKind?: 'weft' | 'flanneld';
  /** The CNI plugin addPod runs on this node, when the test chooses it (another architecture's, under emulation). */
  cniPlugin?: string;
  log: string;
  readonly pods: Pod[];
}

export interface ClusterOptions {
  readonly nodes: number;
  /** The network config JSON written to etcd. */
  readonly config: string;
  /** Extra flags for every agent. */
  readonly agentFlags?: readonly string[];
  /** Namespace names: `tag` is `sw`, `n1`, `p1-`...; default: unique to this process. */
  readonly names?: (tag: string) => string;
  /**
   * Processes write to log files in the cluster directory and outlive this process (the demo's
   * KEEP=1); otherwise their output is captured in `node.log`.
   */
  readonly detached?: boolean;
  /** Where the cluster's files go; default a new temporary directory. */
  readonly dir?: string;
  /**
   * Kubernetes mode: an in-test API server (TLS, token file; see namespaced-apiserver.ts) runs in
   * the switch namespace instead of etcd, and agents run with --kube-subnet-mgr; nodes get their
   * podCIDR from `podCidr(n)` (or later).
   */
  /**
   * An IPv6 underlay beside the IPv4 one (2001:db8:113::/64, default route via the switch), with
   * duplicate address detection off in every namespace so that addresses are usable at once.
   */
  readonly ipv6?: boolean;
  /** etcd as several members, each in a namespace of its own (etcd-members.ts), instead of one in the switch. */
  readonly etcdMembers?: EtcdMembersOptions;
  readonly kube?: {
    /** The Node's podCIDR, or its podCIDRs (dual-stack). */
    readonly podCidr?: (n: number) => string | readonly string[] | undefined;
    readonly bookmarkMs?: number;
    readonly pageCap?: number;
    /** False: the API server pages lists from any version too (kube-apiserver's `--watch-cache=false`). */
    readonly watchCache?: boolean;
    readonly kubeconfigJson?: boolean;
  };
}

const kubePort = 6443;

export class Cluster {
  readonly dir: string;
  readonly sw: string;
  readonly nodes: ClusterNode[] = [];
  #etcd: ChildProcess | undefined;
  /** The etcd members, when the cluster has several (options.etcdMembers). */
  members: EtcdMembers | undefined;
  readonly #namespaces: string[] = [];
  readonly #agentFlags: readonly string[];
  readonly #names: (tag: string) => string;
  readonly #detached: boolean;
  readonly #kube: ClusterOptions['kube'];
  readonly #config: string;
  readonly #ipv6: boolean;
  /** The in-test API server, in kube mode. */
  api: NamespacedApiServer | undefined;

  /** What agents are given as --etcd-endpoints. */
  get endpoint(): string {
    return this.members ? this.members.endpoints.join(',') : `http://${switchIp}:${etcdPort}`;
  }

  private constructor(dir: string, options: ClusterOptions) {
    this.dir = dir;
    this.#names = options.names ?? nsName;
    this.sw = this.#names('sw');
    this.#agentFlags = options.agentFlags ?? [];
    this.#detached = options.detached ?? false;
    this.#kube = options.kube;
    this.#config = options.config;
    this.#ipv6 = options.ipv6 ?? false;
  }

  /** Every namespace and process of the cluster, so that another process can remove them. */
  get inventory(): { namespaces: string[]; pids: number[]; dir: string } {
    const pids = [this.#etcd?.pid, this.api?.pid, ...(this.members?.members.map((m) => m.process?.pid) ?? []), ...this.nodes.map((n) => n.agent?.pid)].filter((p): p is number => p !== undefined);
    return { namespaces: [...this.#namespaces], pids, dir: this.dir };
  }

  static async create(options: ClusterOptions): Promise<Cluster> {
    await sweepStaleNamespaces();
    const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'weft-cluster-')));
    await mkdir(dir, { recursive: true });
    const cluster = new Cluster(dir, options);
    try {
      await cluster.#build(options);
    } catch (err) {
      await cluster.destroy();
      throw err;
    }
    return cluster;
  }

  async #build(options: ClusterOptions): Promise<void> {
    await this.#ns(this.sw);
    await nsExec(this.sw, 'ip', ['link', 'add', 'br0', 'type', 'bridge']);
    await nsExec(this.sw, 'ip', ['addr', 'add', `${switchIp}/24`, 'dev', 'br0']);
    await nsExec(this.sw, 'ip', ['link', 'set', 'br0', 'up']);
    if (this.#ipv6) await nsExec(this.sw, 'ip', ['addr', 'add', `${switchIp6}/64`, 'dev', 'br0', 'nodad']);
    for (let i = 1; i <= options.nodes; i++) await this.addNode();
    if (this.#kube) {
      const k = this.#kube;
      this.api = await NamespacedApiServer.start({
        ns: this.sw,
        dir: this.dir,
        host: switchIp,
        port: kubePort,
        ...(k.bookmarkMs ? { bookmarkMs: k.bookmarkMs } : {}),
        ...(k.pageCap ? { pageCap: k.pageCap } : {}),
        ...(k.watchCache === false ? { watchCache: false } : {}),
        ...(k.kubeconfigJson ? { kubeconfigJson: true } : {}),
      });
      await writeFile(join(this.dir, 'net-conf.json'), this.#config);
      for (const [i, node] of this.nodes.entries()) {
        const given = k.podCidr?.(i + 1);
        const cidrs = given === undefined ? [] : typeof given === 'string' ? [given] : [...given];
        await this.kubeCommand({ op: 'create', name: node.name, spec: cidrs.length > 0 ? { podCIDR: cidrs[0], podCIDRs: cidrs } : {} });
      }
      return;
    }
    if (options.etcdMembers) {
      this.members = await EtcdMembers.start((tag, ip) => this.#host(tag, ip), this.dir, options.etcdMembers, (name, chunk) => {
        this.etcdLog = (this.etcdLog + `[${name}] ${chunk}`).slice(-100_000);
      });
      await this.#waitForEtcd();
      await this.etcd('put', '/coreos.com/network/config', options.config);
      if (options.etcdMembers.ca) await this.etcd('auth');
      return;
    }
    await this.#startEtcd();
    await this.etcd('put', '/coreos.com/network/config', options.config);
  }

  /** The etcd members' output, for a failing test's report. */
  etcdLog = '';

  /** A namespace on the switch with eth0 at `ip`/24 and a default route via the switch. */
  async #host(tag: string, ip: string): Promise<string> {
    const ns = this.#names(tag);
    await this.#ns(ns);
    const port = `v${tag.replace(/^n/, '')}`;
    await sh('ip', ['link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', port, 'netns', this.sw]);
    await nsExec(this.sw, 'ip', ['link', 'set', port, 'master', 'br0', 'up']);
    await nsExec(ns, 'ip', ['addr', 'add', `${ip}/24`, 'dev', 'eth0']);
    await nsExec(ns, 'ip', ['link', 'set', 'eth0', 'up']);
    await nsExec(ns, 'ip', ['route', 'add', 'default', 'via', switchIp]);
    return ns;
  }

  /** Sends a command to the in-test API server (kube mode) and returns its answer. */
  kubeCommand(cmd: Record<string, unknown>): Promise<string> {
    if (!this.api) throw new Error('not a kube-mode cluster');
    return this.api.command(cmd);
  }

  /** Adds a node namespace on the switch (no agent yet). */
  async addNode(): Promise<ClusterNode> {
    const n = this.nodes.length + 1;
    const ip = `203.0.113.${10 + n}`;
    const ns = await this.#host(`n${n}`, ip);
    await nsExec(ns, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    let ip6: string | undefined;
    if (this.#ipv6) {
      ip6 = `2001:db8:113::${10 + n}`;
      await nsExec(ns, 'ip', ['addr', 'add', `${ip6}/64`, 'dev', 'eth0', 'nodad']);
      await nsExec(ns, 'ip', ['-6', 'route', 'add', 'default', 'via', switchIp6]);
      await nsExec(ns, 'sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
    }
    const dir = join(this.dir, `node${n}`);
    await mkdir(dir, { recursive: true });
    const node: ClusterNode = { name: `node${n}`, ns, ip, ...(ip6 ? { ip6 } : {}), dir, subnetFile: join(dir, 'subnet.env'), log: '', pods: [] };
    this.nodes.push(node);
    return node;
  }

  async #ns(name: string): Promise<void> {
    this.#namespaces.push(name);
    await createNetns(name);
    // Before any device is made in it, so that every device inherits it.
    if (this.#ipv6) for (const conf of ['all', 'default']) await nsExec(name, 'sysctl', ['-qw', `net.ipv6.conf.${conf}.accept_dad=0`]);
  }

  /** Stops etcd (its data stays, so `startEtcd` brings the same registry back). */
  async stopEtcd(): Promise<void> {
    if (this.#etcd) await stopProcess(this.#etcd, 'SIGKILL');
    this.#etcd = undefined;
  }

  startEtcd(): Promise<void> {
    return this.#startEtcd();
  }

  async #startEtcd(): Promise<void> {
    const data = join(this.dir, 'etcd');
    this.#etcd = this.#spawn(this.sw, 'etcd', 'etcd.log', [
      '--name', 'sw', '--data-dir', data,
      '--listen-client-urls', `${this.endpoint},http://127.0.0.1:${etcdPort}`,
      '--advertise-client-urls', this.endpoint,
      '--listen-peer-urls', 'http://127.0.0.1:2380',
      '--initial-advertise-peer-urls', 'http://127.0.0.1:2380',
      '--initial-cluster', 'sw=http://127.0.0.1:2380',
      '--heartbeat-interval', '50', '--election-timeout', '500',
      '--logger', 'zap', '--log-level', 'error',
    ]);
    this.#etcd.stdout?.resume();
    this.#etcd.stderr?.resume();
    await this.#waitForEtcd();
  }

  async #waitForEtcd(): Promise<void> {
    for (let i = 0; ; i++) {
      try {
        await this.etcd('get', '/health');
        return;
      } catch (err) {
        if (i > 200) throw new Error(`etcd did not come up: ${this.etcdLog.slice(-2000)}`, { cause: err });
        await delay(50);
      }
    }
  }

  /** Runs an etcd operation from inside the switch namespace; with several members, through `via` (1-based) if given. */
  async etcd(op: 'put' | 'del' | 'get' | 'compact' | 'auth', key = '', value?: string, via?: readonly number[]): Promise<string> {
    const members = this.members ? (via ?? this.members.members.map((_, i) => i + 1)).map((i) => this.members!.endpoints[i - 1]!) : [];
    const endpoints = this.members ? members.join(',') : `http://127.0.0.1:${etcdPort}`;
    const env = this.members ? { ...process.env, ...this.members.adminEnv } : process.env;
    return nsExec(this.sw, process.execPath, [adminScript, endpoints, op, key, ...(value === undefined ? [] : [value])], { env });
  }

  /**
   * Writes many keys at once (100 to a transaction), from a script in the switch namespace: thousands
   * of leases in a second or two. With `ttlSeconds`, each key is attached to an etcd lease of that
   * TTL, as flanneld writes its lease (one etcd lease for all of them: each reads back as its own
   * lease ID all the same).
   */
  async putMany(entries: ReadonlyArray<readonly [string, string]>, options: { ttlSeconds?: number } = {}): Promise<void> {
    const script = `
      const { EtcdGrpc } = await import(${JSON.stringify(fileURLToPath(new URL('../subnet/etcd/etcd-grpc.js', import.meta.url)))});
      const client = new EtcdGrpc({ endpoints: [${JSON.stringify(`http://127.0.0.1:${etcdPort}`)}] });
      let text = ''; for await (const c of process.stdin) text += c;
      const entries = JSON.parse(text);
      const ttl = ${Number(options.ttlSeconds ?? 0)};
      const lease = ttl > 0 ? (await client.leaseGrant(ttl, AbortSignal.timeout(10000))).id : undefined;
      for (let i = 0; i < entries.length; i += 100) await client.txn([], entries.slice(i, i + 100).map(([key, value]) => ({ put: { key, value, ...(lease ? { lease } : {}) } })), AbortSignal.timeout(10000));
      client.close();`;
    await nsExec(this.sw, process.execPath, ['--input-type=module', '-e', script], { input: JSON.stringify(entries) });
  }

  async leases(): Promise<Array<{ key: string; value: string }>> {
    return JSON.parse(await this.etcd('get', '/coreos.com/network/subnets/')) as Array<{ key: string; value: string }>;
  }

  /**
   * Starts `weft agent` in the node's namespace: this checkout's, or the one `env.WEFT_TEST_AGENT_BIN`
   * names (a benchmark's other build, measured in the same run).
   */
  startAgent(node: ClusterNode, extra: readonly string[] = [], env: NodeJS.ProcessEnv = {}): ChildProcess {
    const registry = this.#kube
      ? ['--kube-subnet-mgr', `--kubeconfig-file=${this.api?.kubeconfig ?? ''}`, `--net-config-path=${join(this.dir, 'net-conf.json')}`]
      : [`--etcd-endpoints=${this.endpoint}`, ...(this.members?.agentFlags ?? [])];
    // flanneld (an anchor binary, WEFT_TEST_AGENT_BIN) takes no `agent` command: Go's flag parsing stops at it.
    const bin = env['WEFT_TEST_AGENT_BIN'] ?? weftBin;
    const command = /flanneld[^/]*$/.test(bin) ? [] : ['agent'];
    node.agentKind = command.length === 0 ? 'flanneld' : 'weft';
    // `--iface=eth0` unless the test chooses the interface itself (an earlier --iface would win).
    const iface = extra.some((a) => /^--?(iface|public-ip)/.test(a)) ? [] : ['--iface=eth0'];
    const args = [...command, ...registry, `--subnet-file=${node.subnetFile}`, ...iface, '--iptables-resync=1', ...this.#agentFlags, ...extra];
    // Agents notify only the socket a test gives them, never a systemd the tests run under; and
    // they trust the CAs their kubeconfig names, else the system's as a node's agent finds them,
    // not what this machine's tools are told to trust.
    const inherited = { ...process.env };
    for (const key of ['NOTIFY_SOCKET', 'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR']) delete inherited[key];
    // Each node its own WireGuard key and UAPI sockets: flannel's /run/flannel/wgkey and wg's
    // /var/run/wireguard are one directory for every namespace.
    const child = this.#spawn(node.ns, bin, `${node.name}.log`, args, { ...inherited, NODE_NAME: node.name, WIREGUARD_KEY_FILE: join(node.dir, 'wgkey'), WEFT_WIREGUARD_SOCKET_DIR: join(node.dir, 'wireguard'), ...env });
    node.agent = child;
    const append = (d: Buffer): void => {
      node.log = (node.log + d.toString()).slice(-200_000);
    };
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    return child;
  }

  #spawn(ns: string, cmd: string, logName: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
    if (!this.#detached) return spawnInNetns(ns, cmd, args, env);
    const fd = openSync(join(this.dir, logName), 'a');
    const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { env, stdio: ['ignore', fd, fd], detached: true });
    closeSync(fd);
    child.unref();
    return child;
  }

  async stopAgent(node: ClusterNode, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const agent = node.agent;
    node.agent = undefined;
    return agent ? stopProcess(agent, signal) : null;
  }

  /** The node's subnet.env, once the agent has written it. */
  async subnetEnv(node: ClusterNode): Promise<ReturnType<typeof parseSubnetEnv> | undefined> {
    try {
      return parseSubnetEnv(await readFile(node.subnetFile, 'utf8'));
    } catch {
      return undefined;
    }
  }

  /**
   * Makes a pod on `node` as a container runtime does: weft's CNI plugin (as /opt/cni/bin/flannel,
   * with kube-flannel's netconf), which delegates to the real bridge and host-local plugins;
   * `k8s` names the pod in CNI_ARGS as the kubelet's runtimes do. On a node whose agent is weft's,
   * the static plugin a host gets, whose logic the agent runs; elsewhere (flanneld, or a stand-in
   * the test runs itself), bin/weft, which runs it in its own process.
   */
  async addPod(node: ClusterNode, k8s?: { readonly namespace: string; readonly name: string }): Promise<Pod> {
    // As a kubelet starts pods only on a Ready node: the agent has written its subnet file (its
    // peers may be programmed before it is).
    await waitUntil(`${node.name} wrote its subnet file`, async () => {
      const env = await this.subnetEnv(node);
      return env?.subnet !== undefined || env?.ipv6Subnet !== undefined;
    }, 60_000);
    const ns = this.#names(`${node.name.replace('node', 'p')}-`);
    await this.#ns(ns);
    const id = `${ns}-ctr`;
    const local = node.agentKind !== 'weft';
    const bin = join(node.dir, node.cniPlugin ? 'cni-bin-chosen' : local ? 'cni-bin-local' : 'cni-bin');
    await mkdir(bin, { recursive: true });
    await symlink(node.cniPlugin ?? (local ? weftBin : staticCniPlugin), join(bin, 'flannel')).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    const conf = {
      cniVersion: '0.3.1',
      name: 'cbr0',
      type: 'flannel',
      subnetFile: node.subnetFile,
      dataDir: join(node.dir, 'cni-state'),
      delegate: { hairpinMode: true, isDefaultGateway: true },
      ipam: { dataDir: join(node.dir, 'ipam') },
    };
    const out = await nsExec(node.ns, join(bin, 'flannel'), [], {
      input: JSON.stringify(conf),
      env: {
        ...process.env,
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: id,
        CNI_NETNS: `/var/run/netns/${ns}`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: `${bin}:/usr/lib/cni`,
        // As the kubelet's runtimes pass a pod's identity.
        ...(k8s ? { CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${k8s.namespace};K8S_POD_NAME=${k8s.name};K8S_POD_INFRA_CONTAINER_ID=${id}` } : {}),
      },
    });
    const result = JSON.parse(out) as { ips: Array<{ address: string }> };
    const ips = result.ips.map((i) => i.address.split('/')[0]!);
    const pod = { ns, ip: ips[0]!, ips, id };
    node.pods.push(pod);
    return pod;
  }

  /** One ping from a pod; true when it was answered. */
  async ping(from: Pod, to: string): Promise<boolean> {
    try {
      await nsExec(from.ns, 'ping', ['-c', '1', '-W', '1', '-q', to]);
      return true;
    } catch {
      return false;
    }
  }

  /** GET a path of the node agent's health server (on 127.0.0.1 inside the node's namespace). */
  async health(node: ClusterNode, port: number, path = '/healthz'): Promise<{ status: number; body: Record<string, unknown> }> {
    const script = `const r = await fetch('http://127.0.0.1:${port}${path}', { headers: { accept: 'application/json' } }); process.stdout.write(JSON.stringify({ status: r.status, body: await r.json() }));`;
    return JSON.parse(await nsExec(node.ns, process.execPath, ['--input-type=module', '-e', script])) as { status: number; body: Record<string, unknown> };
  }

  /** Routes of a node's main table, as iproute2 reports them. */
  routes(node: ClusterNode): Promise<Array<{ dst: string; gateway?: string; dev: string; flags: string[] }>> {
    return ipJson(node.ns, ['route', 'show']);
  }

  /**
   * Destroys the cluster after the test, first writing the agents' logs to stderr: whole when asked
   * (WEFT_TEST_LOG), their ends when the test failed (node:test sets `passed` before the hooks
   * run), since a failure on a CI machine is otherwise all that is left of it.
   */
  destroyAfter(t: { after(fn: () => Promise<void>): void; readonly passed?: boolean }, before?: () => Promise<void>): void {
    t.after(async () => {
      const whole = Boolean(process.env['WEFT_TEST_LOG']);
      if (whole || t.passed === false) for (const n of this.nodes) process.stderr.write(`--- ${n.name}${whole ? '' : ', the end of its log'}\n${whole ? n.log : n.log.slice(-4000)}\n`);
      if (whole && this.etcdLog) process.stderr.write(`--- etcd\n${this.etcdLog}\n`);
      await before?.();
      await this.destroy();
    });
  }

  async destroy(): Promise<void> {
    for (const node of this.nodes) await this.stopAgent(node, 'SIGKILL').catch(() => undefined);
    if (this.#etcd) await stopProcess(this.#etcd, 'SIGKILL').catch(() => undefined);
    await this.members?.stop();
    await this.api?.stop().catch(() => undefined);
    for (const ns of [...this.#namespaces].reverse()) await deleteNetns(ns);
    await rm(this.dir, { recursive: true, force: true });
  }
}
