/**
 * `weft doctor`'s checks, pure: facts about the node in, one verdict per check out, each with what
 * to do when it fails. The problems are the ones flannel users hit (forwarding off, a FORWARD chain
 * that drops pod traffic, strict reverse-path filtering, MTUs that disagree, stale kernel entries,
 * a subnet file that disagrees with the lease, two leases with one public IP, iptables rules split
 * between the legacy and the nf_tables backends, vxlan blocked between nodes, checksum offload on
 * vxlan behind NAT). Facts are gathered by doctor.ts.
 */
import { tryParseCidr } from '../ip/cidr.js';
import { formatIp } from '../ip/ip.js';
import type { StatusReport } from './status-report.js';

export interface DeviceFact {
  readonly name: string;
  readonly mtu: number;
  readonly kind?: string;
  /** The bridge a port belongs to (pod veths: `cni0`). */
  readonly master?: string;
}

export interface HostFacts {
  readonly ipForward: boolean;
  /** Only when the node has an IPv6 pod subnet. */
  readonly ip6Forward?: boolean;
  /** The filter FORWARD chain drops by default (iptables), and whether flannel's accept rules are in it. */
  readonly forwardPolicyDrop: boolean;
  readonly flannelForwardRules: boolean;
  /** nftables tables other than flannel's whose forward-hook chain drops by default. */
  readonly nftDroppingForward: readonly string[];
  /** Effective rp_filter per flannel device and bridge: max(conf/all, conf/<dev>). */
  readonly rpFilter: ReadonlyArray<{ readonly device: string; readonly value: number }>;
  readonly devices: readonly DeviceFact[];
  /** `net.bridge.bridge-nf-call-iptables` / `-ip6tables`: undefined when br_netfilter is not loaded. */
  readonly bridgeNfCall?: { readonly 4?: number; readonly 6?: number };
  /** cni0's global addresses (`198.18.5.1/24`), when the bridge exists. */
  readonly bridgeAddresses?: readonly string[];
  /** The subnet file, as the CNI plugin reads it. */
  readonly subnetEnv?: { readonly subnets: readonly string[]; readonly mtu?: number };
  /** The agent's report, when one answers. */
  readonly status?: StatusReport;
  /** Routes into the cluster network through flannel's devices (or via the external interface for host-gw). */
  readonly clusterRoutes: readonly string[];
  /** Rule counts (`-A` lines) in the legacy and the nf_tables iptables backends. */
  readonly legacyRules: number;
  readonly nftRules: number;
  /** Which iptables the agent uses on this host, and why (iptables-variant.ts); undefined in nftables mode. */
  readonly iptablesVariant?: { readonly variant: string | undefined; readonly why: string };
  /**
   * vxlan: a ping to each programmed peer's vxlan device address, which crosses the underlay in
   * the peer's UDP port; undefined when there is no agent or the backend is not vxlan.
   */
  readonly vxlanProbes?: ReadonlyArray<{ readonly peer: string; readonly target: string; readonly answered: boolean }>;
  /** vxlan devices with `tx-checksum-ip-generic` on (ethtool), when ethtool is there. */
  readonly checksumOffload?: readonly string[];
  /** The public IPs the agent publishes that no local interface has: this node is behind NAT. */
  readonly natted?: boolean;
}

export interface Verdict {
  readonly check: string;
  readonly result: 'ok' | 'fail' | 'skip';
  readonly detail: string;
  /** What to do, when it failed. */
  readonly fix?: string;
}

const ok = (check: string, detail: string): Verdict => ({ check, result: 'ok', detail });
const fail = (check: string, detail: string, fix: string): Verdict => ({ check, result: 'fail', detail, fix });
const skip = (check: string, detail: string): Verdict => ({ check, result: 'skip', detail });

export function runChecks(f: HostFacts): Verdict[] {
  const out: Verdict[] = [];
  out.push(f.ipForward ? ok('ip_forward', 'net.ipv4.ip_forward is 1') : fail('ip_forward', 'net.ipv4.ip_forward is 0: this node routes no pod traffic', 'sysctl -w net.ipv4.ip_forward=1 (and persist it in /etc/sysctl.d)'));
  if (f.ip6Forward !== undefined) {
    out.push(f.ip6Forward ? ok('ipv6 forwarding', 'net.ipv6.conf.all.forwarding is 1') : fail('ipv6 forwarding', 'net.ipv6.conf.all.forwarding is 0 on a node with an IPv6 pod subnet', 'sysctl -w net.ipv6.conf.all.forwarding=1'));
  }
  if (f.forwardPolicyDrop && !f.flannelForwardRules) {
    out.push(fail('forward chain', 'the FORWARD chain drops by default and flannel\'s accept rules are not in it: pod traffic between nodes is dropped', 'run the agent with --iptables-forward-rules (the default), or accept the cluster network in FORWARD'));
  } else if (f.nftDroppingForward.length > 0) {
    out.push(fail('forward chain', `nftables table(s) ${f.nftDroppingForward.join(', ')} drop forwarded traffic by default`, 'accept the cluster network in that table\'s forward chain, or use EnableNFTables so that weft\'s own forward chain is there'));
  } else {
    out.push(ok('forward chain', f.forwardPolicyDrop ? 'FORWARD drops by default, and flannel\'s accept rules are in it' : 'forwarded traffic is not dropped by default'));
  }
  const strict = f.rpFilter.filter((r) => r.value === 1);
  out.push(
    strict.length > 0
      ? fail('rp_filter', `strict reverse-path filtering on ${strict.map((r) => r.device).join(', ')}: replies from other nodes' pods can be dropped`, `sysctl -w net.ipv4.conf.<device>.rp_filter=2 (loose) for ${strict.map((r) => r.device).join(', ')}, and not 1 in conf.all`)
      : ok('rp_filter', f.rpFilter.length > 0 ? `not strict on ${f.rpFilter.map((r) => r.device).join(', ')}` : 'no flannel device or bridge yet'),
  );
  out.push(mtuCheck(f));
  out.push(subnetFileCheck(f));
  out.push(bridgeAddressCheck(f));
  out.push(brNetfilterCheck(f));
  out.push(staleRoutesCheck(f));
  out.push(duplicatePublicIpCheck(f));
  out.push(vxlanProbeCheck(f));
  out.push(checksumCheck(f));
  out.push(
    f.legacyRules > 0 && f.nftRules > 0
      ? fail('iptables backends', `rules in both iptables backends (legacy: ${f.legacyRules}, nf_tables: ${f.nftRules}): each half is invisible to the other's tools`, 'make every program on the node use one backend (update-alternatives --config iptables), then remove the other\'s rules')
      : ok('iptables backends', f.legacyRules > 0 ? 'rules in the legacy backend only' : 'rules in the nf_tables backend only, or none'),
  );
  if (f.iptablesVariant) out.push(ok('iptables variant', `the agent uses ${f.iptablesVariant.variant ? `iptables-${f.iptablesVariant.variant}` : 'iptables as installed'}: ${f.iptablesVariant.why}`));
  return out;
}

/** Pods' veths must have FLANNEL_MTU; no flannel vxlan device may be smaller than it. */
function mtuCheck(f: HostFacts): Verdict {
  const want = f.subnetEnv?.mtu;
  if (want === undefined) return skip('mtu', 'no subnet file with FLANNEL_MTU');
  const problems: string[] = [];
  for (const d of f.devices) {
    if (d.kind === 'vxlan' && /^flannel(-v6)?\.\d+$/.test(d.name) && d.mtu < want) problems.push(`${d.name} has MTU ${d.mtu}, below the pods' ${want}`);
    if (d.master === 'cni0' && d.mtu !== want) problems.push(`pod interface ${d.name} has MTU ${d.mtu}, not ${want}`);
  }
  return problems.length > 0
    ? fail('mtu', problems.join('; '), 'pods made before an MTU change keep the old one: recreate them; a vxlan device below FLANNEL_MTU means the underlay MTU changed: restart the agent')
    : ok('mtu', `pods' MTU ${want}; the vxlan devices and pod interfaces agree`);
}

function subnetFileCheck(f: HostFacts): Verdict {
  if (!f.status?.lease) return skip('subnet file', 'no agent answers: nothing to compare the subnet file with');
  if (!f.subnetEnv) return fail('subnet file', 'the agent holds a lease but there is no subnet file', 'check --subnet-file: the CNI plugin reads the same path');
  const lease = f.status.lease.subnets.split(',');
  const same = lease.length === f.subnetEnv.subnets.length && lease.every((s) => f.subnetEnv!.subnets.includes(s));
  return same
    ? ok('subnet file', `matches the lease (${lease.join(', ')})`)
    : fail('subnet file', `the subnet file says ${f.subnetEnv.subnets.join(', ') || 'nothing'}, the lease ${lease.join(', ')}`, 'two agents may write one file, or the file is left from another run: check --subnet-file');
}

/**
 * flannel's most asked question: the bridge plugin fails every pod with "cni0 already has an IP
 * address different from <gateway>" once the node's subnet changed (a new lease after an expiry,
 * a wiped registry, a reinstall) while cni0 kept the old gateway.
 */
function bridgeAddressCheck(f: HostFacts): Verdict {
  const subnets = f.status?.lease?.subnets.split(',') ?? f.subnetEnv?.subnets ?? [];
  if (subnets.length === 0) return skip('cni0 address', 'no subnet known: no agent answers and no subnet file');
  if (!f.bridgeAddresses) return skip('cni0 address', 'no cni0 yet (the first pod makes it)');
  const gateways = subnets.flatMap((s) => {
    const cidr = tryParseCidr(s);
    return cidr ? [`${formatIp({ family: cidr.ip.family, value: cidr.ip.value + 1n })}/${cidr.prefix}`] : [];
  });
  const family = (a: string): string => (a.includes(':') ? '6' : '4');
  const wrong = f.bridgeAddresses.filter((a) => !gateways.includes(a) && gateways.some((g) => family(g) === family(a)));
  if (wrong.length === 0) return ok('cni0 address', `cni0 has ${gateways.filter((g) => f.bridgeAddresses!.includes(g)).join(', ') || 'no address yet'}, the gateway of this node's subnet`);
  return fail(
    'cni0 address',
    `cni0 has ${wrong.join(', ')}, not the gateway of this node's subnet (${gateways.join(', ')}): every new pod fails with "cni0 already has an IP address different from ..."`,
    'the node moved to another subnet while cni0 kept the old one: ip link delete cni0, then recreate this node\'s pods (they hold addresses of the old subnet)',
  );
}

/**
 * flanneld 0.28 refuses to start in iptables mode without br_netfilter; with it loaded but off,
 * pods on one node reach each other through cni0 without iptables, and Services break for them.
 */
function brNetfilterCheck(f: HostFacts): Verdict {
  if (f.status?.trafficMode === 'nftables') return skip('br_netfilter', 'nftables mode: flannel does not need it');
  const families: Array<4 | 6> = [4, ...(f.ip6Forward !== undefined ? [6 as const] : [])];
  const missing = families.filter((fam) => f.bridgeNfCall?.[fam] === undefined);
  if (missing.length > 0) {
    return fail('br_netfilter', `br_netfilter is not loaded (no net.bridge.bridge-nf-call-${missing.map((m) => (m === 4 ? 'iptables' : 'ip6tables')).join(', -')}): flanneld refuses to start, and Services break for pods on one node`, 'modprobe br_netfilter, and list it in /etc/modules-load.d');
  }
  const off = families.filter((fam) => f.bridgeNfCall?.[fam] !== 1);
  if (off.length > 0) {
    const names = off.map((m) => `net.bridge.bridge-nf-call-${m === 4 ? 'iptables' : 'ip6tables'}`);
    return fail('br_netfilter', `${names.join(', ')} is 0: traffic between pods of this node skips iptables, and Services break for them`, `sysctl -w ${names.map((n) => `${n}=1`).join(' ')} (and persist it in /etc/sysctl.d)`);
  }
  return ok('br_netfilter', 'loaded, and bridged traffic goes through iptables');
}

/** Routes into the cluster network that no programmed peer backs (flannel #2554). */
function staleRoutesCheck(f: HostFacts): Verdict {
  if (!f.status) return skip('stale routes', 'no agent answers: nothing to compare the kernel with');
  // udp: one route for the whole network through flannel0 (doctor.ts leaves it out); peers live in
  // the forwarder's table, not in routes.
  const udp = f.status.lease?.backend === 'udp';
  const backed = new Set(udp ? [] : f.status.peers.filter((p) => p.state === 'programmed').flatMap((p) => p.subnet.split(',')));
  const own = new Set(f.status.lease?.subnets.split(',') ?? []);
  const stale = f.clusterRoutes.filter((r) => !backed.has(r) && !own.has(r));
  const unprogrammed = [...backed].filter((s) => !f.clusterRoutes.includes(s));
  if (stale.length === 0 && unprogrammed.length === 0) {
    return ok('stale routes', udp ? 'udp: no route into the cluster network but flannel0\'s own' : `${f.clusterRoutes.length} route(s) into the cluster network, each backed by a lease`);
  }
  return fail(
    'stale routes',
    [stale.length ? `no lease backs ${stale.join(', ')}` : '', unprogrammed.length ? `no route for programmed ${unprogrammed.join(', ')}` : ''].filter(Boolean).join('; '),
    'the agent removes stale entries on its own within a second; if they stay, something else writes them (another agent, a leftover flanneld)',
  );
}

function duplicatePublicIpCheck(f: HostFacts): Verdict {
  if (!f.status) return skip('public IPs', 'no agent answers');
  const seen = new Map<string, string[]>();
  const add = (ip: string | undefined, subnet: string): void => {
    if (!ip || ip === '0.0.0.0') return;
    seen.set(ip, [...(seen.get(ip) ?? []), subnet]);
  };
  if (f.status.lease) {
    add(f.status.lease.publicIp, f.status.lease.subnets);
    add(f.status.lease.publicIpv6, f.status.lease.subnets);
  }
  for (const p of f.status.peers) {
    add(p.publicIp, p.subnet);
    add(p.publicIpv6, p.subnet);
  }
  const dup = [...seen].filter(([, subnets]) => subnets.length > 1);
  return dup.length > 0
    ? fail('public IPs', dup.map(([ip, subnets]) => `${ip} is the public IP of ${subnets.join(' and ')}`).join('; '), 'a node that changed subnet left its old lease: delete the stale lease (etcd) or fix the Node\'s annotations')
    : ok('public IPs', 'no two leases share a public IP');
}

function vxlanProbeCheck(f: HostFacts): Verdict {
  if (!f.vxlanProbes) return skip('vxlan reachability', f.status ? 'not a vxlan node' : 'no agent answers: no peers to probe');
  const silent = f.vxlanProbes.filter((p) => !p.answered);
  if (silent.length > 0) {
    return fail(
      'vxlan reachability',
      `no answer through vxlan from ${silent.map((p) => `${p.target} (${p.peer})`).join(', ')}`,
      'allow the vxlan UDP port (8472 unless Backend.Port says otherwise) between the nodes\' public IPs in every firewall and security group on the way',
    );
  }
  return ok('vxlan reachability', f.vxlanProbes.length > 0 ? `every peer's vxlan device answers (${f.vxlanProbes.length})` : 'no peers to probe');
}

/** flannel #1813, #2152: behind NAT, vxlan packets with offloaded checksums arrive corrupted. */
function checksumCheck(f: HostFacts): Verdict {
  if (f.checksumOffload === undefined) return skip('checksum offload', 'ethtool is not installed');
  if (!f.natted) return ok('checksum offload', 'this node is not behind NAT (its public IPs are its own)');
  if (f.checksumOffload.length === 0) return ok('checksum offload', 'behind NAT, with tx-checksum-ip-generic off on the vxlan devices');
  return fail(
    'checksum offload',
    `this node is behind NAT and ${f.checksumOffload.join(', ')} offload(s) checksums: peers can receive corrupted vxlan packets`,
    `ethtool -K ${f.checksumOffload[0]} tx-checksum-ip-generic off (for each vxlan device, after each agent start)`,
  );
}
