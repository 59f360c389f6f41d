/**
 * `weft doctor`: gathers facts about this node (sysctls, the FORWARD chain, nftables, devices and
 * routes, the subnet file, the agent's report when one answers, both iptables backends) and prints
 * one verdict per check (doctor-checks.ts). Reads only; works with or without a running agent.
 */
import { readFile } from 'node:fs/promises';
import { cidrEquals, containsCidr, formatCidr, tryParseCidr } from '../ip/cidr.js';
import { readSubnetEnv } from '../subnet/subnet-env.js';
import { detectIptablesVariant } from '../traffic/iptables-variant.js';
import { execCommand, isMissingCommand } from '../traffic/exec.js';
import { type DeviceFact, type HostFacts, type Verdict, runChecks } from './doctor-checks.js';
import { fetchStatus, statusUrl } from './status-client.js';
import type { StatusReport } from './status-report.js';

export interface DoctorOptions {
  readonly subnetFile: string;
  readonly healthzIp: string;
  /** 0: do not ask an agent. */
  readonly healthzPort: number;
  readonly signal: AbortSignal;
}

const sysctl = async (path: string): Promise<number | undefined> => {
  try {
    return Number((await readFile(`/proc/sys/${path}`, 'utf8')).trim());
  } catch {
    return undefined;
  }
};

/** A command's output, or '' when the command is not installed. */
const run = async (cmd: string, args: readonly string[]): Promise<string> => {
  try {
    return await execCommand(cmd, args);
  } catch (err) {
    if (isMissingCommand(err)) return '';
    throw err;
  }
};

const ruleLines = (save: string): number => save.split('\n').filter((l) => l.startsWith('-A ')).length;

async function gatherFacts(o: DoctorOptions): Promise<HostFacts> {
  let status: StatusReport | undefined;
  if (o.healthzPort > 0) status = await fetchStatus(statusUrl(o.healthzIp, o.healthzPort), o.signal).catch(() => undefined);
  // The agent says which subnet file it writes and which networks it serves: doctor's own
  // --subnet-file (the default path) may not be the agent's.
  const env = await readSubnetEnv(status?.subnetFile ?? o.subnetFile).catch(() => undefined);
  const hasEnv = env !== undefined && (env.subnet !== undefined || env.ipv6Subnet !== undefined);

  const filter = await run('iptables-save', ['-t', 'filter']);
  const forwardPolicyDrop = /^:FORWARD DROP/m.test(filter);
  const flannelForwardRules = /^-A FORWARD .*-j FLANNEL-FWD$/m.test(filter) && /^-A FLANNEL-FWD .*-j ACCEPT$/m.test(filter);

  const nftDroppingForward: string[] = [];
  const ruleset = await run('nft', ['-j', 'list', 'chains']);
  if (ruleset) {
    const items = (JSON.parse(ruleset) as { nftables?: Array<{ chain?: { family: string; table: string; hook?: string; policy?: string } }> }).nftables ?? [];
    for (const { chain } of items) {
      // iptables-nft keeps its tables as ip/ip6 `filter`: the FORWARD check above reads them.
      if (chain?.hook !== 'forward' || chain.policy !== 'drop' || chain.table.startsWith('flannel-') || chain.table === 'filter') continue;
      nftDroppingForward.push(`${chain.family} ${chain.table}`);
    }
  }

  const links = JSON.parse((await run('ip', ['-j', '-d', 'link', 'show'])) || '[]') as Array<{ ifname: string; mtu: number; master?: string; linkinfo?: { info_kind?: string } }>;
  const devices: DeviceFact[] = links.map((l) => ({ name: l.ifname, mtu: l.mtu, ...(l.linkinfo?.info_kind ? { kind: l.linkinfo.info_kind } : {}), ...(l.master ? { master: l.master } : {}) }));
  const all = (await sysctl('net/ipv4/conf/all/rp_filter')) ?? 0;
  const rpFilter: Array<{ device: string; value: number }> = [];
  for (const d of devices) {
    if (!/^(flannel(-v6)?\.\d+|cni0)$/.test(d.name)) continue;
    rpFilter.push({ device: d.name, value: Math.max(all, (await sysctl(`net/ipv4/conf/${d.name}/rp_filter`)) ?? 0) });
  }

  const fromAgent = (status?.networks ?? []).flatMap((n) => tryParseCidr(n) ?? []);
  const networks = fromAgent.length > 0 ? fromAgent : env ? [...env.networks, ...env.ipv6Networks] : [];
  const clusterRoutes: string[] = [];
  for (const family of ['-4', '-6']) {
    const routes = JSON.parse((await run('ip', ['-j', family, 'route', 'show'])) || '[]') as Array<{ dst: string; dev?: string; gateway?: string }>;
    for (const r of routes) {
      const dst = tryParseCidr(r.dst.includes('/') ? r.dst : `${r.dst}/${family === '-4' ? 32 : 128}`);
      if (!dst || !networks.some((n) => containsCidr(n, dst)) || r.dev === 'cni0') continue;
      if (!(r.dev?.startsWith('flannel') || r.gateway)) continue;
      // The kernel's own route to the vxlan device's address lies in the node's subnet.
      if ([env?.subnet, env?.ipv6Subnet].some((own) => own && containsCidr(own, dst))) continue;
      // udp's one route, for the whole network through flannel0.
      if (r.dev === 'flannel0' && networks.some((n) => cidrEquals(n, dst))) continue;
      clusterRoutes.push(formatCidr(dst));
    }
  }

  // vxlan: ping each programmed peer's vxlan device; the echo crosses the underlay in UDP.
  let vxlanProbes: HostFacts['vxlanProbes'];
  if (status?.lease?.backend === 'vxlan') {
    const targets = status.peers.filter((p) => p.state === 'programmed').flatMap((p) => p.subnet.split(',').map((s) => ({ peer: p.publicIp ?? p.publicIpv6 ?? '', target: s.split('/')[0]! })));
    vxlanProbes = await Promise.all(
      targets.slice(0, 64).map(async (t) => ({ ...t, answered: await run('ping', ['-c', '1', '-W', '2', '-q', t.target]).then(() => true, () => false) })),
    );
  }
  const offloading: string[] = [];
  let ethtool = true;
  for (const d of devices.filter((x) => x.kind === 'vxlan' && /^flannel(-v6)?\.\d+$/.test(x.name))) {
    const features = await run('ethtool', ['-k', d.name]);
    if (features === '') ethtool = false;
    else if (/^\s*tx-checksum-ip-generic: on/m.test(features)) offloading.push(d.name);
  }
  const addrs = JSON.parse((await run('ip', ['-j', 'addr', 'show'])) || '[]') as Array<{ ifname?: string; addr_info?: Array<{ local?: string; prefixlen?: number; scope?: string }> }>;
  const bridge = addrs.find((a) => a.ifname === 'cni0');
  const bridgeAddresses = bridge ? (bridge.addr_info ?? []).flatMap((i) => (i.local && i.prefixlen !== undefined && i.scope === 'global' ? [`${i.local}/${i.prefixlen}`] : [])) : undefined;
  const local = new Set(addrs.flatMap((a) => (a.addr_info ?? []).flatMap((i) => (i.local ? [i.local] : []))));
  const published = [status?.lease?.publicIp, status?.lease?.publicIpv6].filter((ip): ip is string => ip !== undefined && ip !== '0.0.0.0');
  const natted = published.length > 0 && published.some((ip) => !local.has(ip));

  const legacyRules = ruleLines(await run('iptables-legacy-save', [])) + ruleLines(await run('ip6tables-legacy-save', []));
  const nftRules = ruleLines(await run('iptables-nft-save', [])) + ruleLines(await run('ip6tables-nft-save', []));
  const iptablesVariant = status?.trafficMode === 'nftables' ? undefined : await detectIptablesVariant(execCommand);
  const ip6Forward = env?.ipv6Subnet ? (await sysctl('net/ipv6/conf/all/forwarding')) === 1 : undefined;
  const nf4 = await sysctl('net/bridge/bridge-nf-call-iptables');
  const nf6 = await sysctl('net/bridge/bridge-nf-call-ip6tables');
  return {
    bridgeNfCall: { ...(nf4 !== undefined ? { 4: nf4 } : {}), ...(nf6 !== undefined ? { 6: nf6 } : {}) },
    ipForward: (await sysctl('net/ipv4/ip_forward')) === 1,
    ...(ip6Forward !== undefined ? { ip6Forward } : {}),
    forwardPolicyDrop,
    flannelForwardRules,
    nftDroppingForward,
    rpFilter,
    devices,
    ...(bridgeAddresses ? { bridgeAddresses } : {}),
    ...(hasEnv ? { subnetEnv: { subnets: [env.subnet, env.ipv6Subnet].flatMap((c) => (c ? [formatCidr(c)] : [])), ...(env.mtu !== undefined ? { mtu: env.mtu } : {}) } } : {}),
    ...(status ? { status } : {}),
    clusterRoutes,
    legacyRules,
    nftRules,
    ...(iptablesVariant ? { iptablesVariant } : {}),
    ...(vxlanProbes ? { vxlanProbes } : {}),
    ...(ethtool ? { checksumOffload: offloading } : {}),
    natted,
  };
}

/** One line per check: `ok`, `FAIL` with what to do, or `skip` with why. */
export function formatVerdicts(verdicts: readonly Verdict[]): string {
  const width = Math.max(...verdicts.map((v) => v.check.length));
  return verdicts
    .map((v) => `${v.result === 'ok' ? 'ok  ' : v.result === 'fail' ? 'FAIL' : 'skip'}  ${v.check.padEnd(width)}  ${v.detail}${v.fix ? `\n${' '.repeat(width + 8)}fix: ${v.fix}` : ''}`)
    .join('\n') + '\n';
}

export async function doctor(o: DoctorOptions): Promise<Verdict[]> {
  return runChecks(await gatherFacts(o));
}
