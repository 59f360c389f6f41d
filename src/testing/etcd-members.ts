/**
 * A multi-member etcd cluster for end-to-end tests, each member in a namespace of its own on the
 * test cluster's switch (203.0.113.201, .202, ...), so that a test can partition one member from
 * the others (nftables rules inside its namespace) or stop it (SIGSTOP, by pid) while clients
 * still reach it. Optionally secured as operators secure etcd: TLS, client certificates
 * required, auth on, and the agents' user named by their certificate's CommonName (`flannel`),
 * with a role limited to flannel's prefix.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { nsExec, spawnInNetns, stopProcess } from './netns.js';
import type { TestCa } from './test-ca.js';

export interface EtcdMembersOptions {
  readonly count: number;
  /** Secured: TLS with client-certificate auth and etcd auth (the CA must cover the members' IPs). */
  readonly ca?: TestCa;
  /** More etcd flags for every member. */
  readonly args?: readonly string[];
}

export interface EtcdMember {
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  process: ChildProcess | undefined;
}

/** The members' addresses: tests choose which to partition or stop. */
export const memberIp = (i: number): string => `203.0.113.${200 + i}`;

export class EtcdMembers {
  readonly members: EtcdMember[];
  readonly endpoints: string[];
  /** Flags for an agent (weft or flanneld) to reach the cluster as user `flannel`. */
  agentFlags: string[] = [];
  /** Environment for the admin script (etcd-admin.ts): root's certificate. */
  adminEnv: Record<string, string> = {};
  readonly #options: EtcdMembersOptions;
  readonly #dir: string;
  readonly #log: (name: string, chunk: string) => void;

  private constructor(members: EtcdMember[], dir: string, options: EtcdMembersOptions, log: (name: string, chunk: string) => void) {
    this.members = members;
    this.#dir = dir;
    this.#options = options;
    this.#log = log;
    const scheme = options.ca ? 'https' : 'http';
    this.endpoints = members.map((m) => `${scheme}://${m.ip}:2379`);
  }

  /** Starts the members in namespaces `host(tag, ip)` makes on the switch. */
  static async start(host: (tag: string, ip: string) => Promise<string>, dir: string, options: EtcdMembersOptions, log: (name: string, chunk: string) => void): Promise<EtcdMembers> {
    const members: EtcdMember[] = [];
    for (let i = 1; i <= options.count; i++) members.push({ name: `etcd${i}`, ns: await host(`e${i}`, memberIp(i)), ip: memberIp(i), process: undefined });
    const cluster = new EtcdMembers(members, dir, options, log);
    if (options.ca) {
      const root = await options.ca.client('root');
      const flannel = await options.ca.client('flannel');
      cluster.adminEnv = { ETCD_CAFILE: options.ca.caFile, ETCD_CERTFILE: root.certFile, ETCD_KEYFILE: root.keyFile };
      cluster.agentFlags = [`--etcd-cafile=${options.ca.caFile}`, `--etcd-certfile=${flannel.certFile}`, `--etcd-keyfile=${flannel.keyFile}`];
    }
    for (const m of members) cluster.#spawn(m);
    return cluster;
  }

  #spawn(m: EtcdMember): void {
    const ca = this.#options.ca;
    const client = `${ca ? 'https' : 'http'}://${m.ip}:2379`;
    const args = [
      '--name', m.name,
      '--data-dir', join(this.#dir, m.name),
      '--listen-client-urls', client,
      '--advertise-client-urls', client,
      '--listen-peer-urls', `http://${m.ip}:2380`,
      '--initial-advertise-peer-urls', `http://${m.ip}:2380`,
      '--initial-cluster', this.members.map((x) => `${x.name}=http://${x.ip}:2380`).join(','),
      '--initial-cluster-state', 'new',
      '--heartbeat-interval', '50', '--election-timeout', '500',
      '--logger', 'zap', '--log-level', 'warn',
      ...(ca ? ['--cert-file', ca.serverCert, '--key-file', ca.serverKey, '--client-cert-auth', '--trusted-ca-file', ca.caFile] : []),
      ...(this.#options.args ?? []),
    ];
    const proc = spawnInNetns(m.ns, 'etcd', args);
    m.process = proc;
    proc.stdout?.on('data', (d: Buffer) => this.#log(m.name, d.toString()));
    proc.stderr?.on('data', (d: Buffer) => this.#log(m.name, d.toString()));
  }

  /** Cuts member `i` (1-based) off from the other members; clients still reach it. */
  async partition(i: number): Promise<void> {
    const m = this.members[i - 1]!;
    const others = this.members.filter((x) => x !== m).map((x) => x.ip).join(', ');
    const rules = `table inet weft_test_partition {\n chain input { type filter hook input priority 0; ip saddr { ${others} } drop; }\n chain output { type filter hook output priority 0; ip daddr { ${others} } drop; }\n}\n`;
    await nsExec(m.ns, 'nft', ['-f', '-'], { input: rules });
  }

  async heal(i: number): Promise<void> {
    await nsExec(this.members[i - 1]!.ns, 'nft', ['delete', 'table', 'inet', 'weft_test_partition']);
  }

  /** Freezes member `i` (SIGSTOP): its connections stay open and answer nothing, as a hung host's. */
  pause(i: number): void {
    this.members[i - 1]!.process?.kill('SIGSTOP');
  }

  resume(i: number): void {
    this.members[i - 1]!.process?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    for (const m of this.members) {
      if (!m.process) continue;
      m.process.kill('SIGCONT');
      await stopProcess(m.process, 'SIGKILL').catch(() => undefined);
      m.process = undefined;
    }
  }
}
