/**
 * The flannel CNI plugin (installed as /opt/cni/bin/flannel and /opt/cni/bin/weft): CNI_COMMAND
 * dispatch over the plugin's netconf, subnet.env and a delegate (flannel-compat §10). Kept free of
 * etcd, netlink and backend code so it starts fast for every pod.
 *
 * Beyond flannel's plugin: STATUS fails (code 50) while subnet.env is missing, so a runtime can
 * tell that the node's agent is not ready; GC removes the saved state of containers the runtime
 * no longer knows (after a DEL to their delegate); DEL keeps the saved state when the delegate's
 * DEL fails, so a retry can still clean up (flannel 1.9 leaks it); where the agent keeps
 * NetworkPolicy, ADD tells it the pod's addresses and waits until the pod is isolated
 * (policy-hook.ts).
 */
import { version as weftVersion } from '../core/version.js';
import { type ParsedSubnetEnv, maxSubnetEnvBytes, parseSubnetEnv } from '../subnet/subnet-env.js';
import { formatCidr } from '../ip/cidr.js';
import { isJsonObject } from '../json/go-json.js';
import { CniCodes, CniError } from './cni-error.js';
import { checkEnv } from './cni-env.js';
import { buildDelegateConfig, requireSubnetEnv, sortedJson } from './delegate-config.js';
import type { CniHost } from './cni-host.js';
import { type DelegateLimits, execDelegate, findPlugin } from './delegate.js';
import { type FlannelNetConf, checkVersion, parseNetConf, supportedVersions, versionAtLeast } from './netconf.js';
import { announce, podOf, resultIps } from './policy-hook.js';
import { type Attachment, listState, loadState, removeState, saveState } from './scratch-store.js';

export interface CniIo {
  readonly stdin: () => Promise<string>;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** Where the files and delegates are: this process's (local-host.ts) or the static plugin's (remote-host.ts). */
  readonly host: CniHost;
}

/** How long a delegate may run; WEFT_CNI_DELEGATE_TIMEOUT_MS overrides it. */
const defaultDelegateTimeoutMs = 120_000;

function delegateLimits(env: Env): DelegateLimits {
  const given = Number(env['WEFT_CNI_DELEGATE_TIMEOUT_MS']);
  return { timeoutMs: Number.isInteger(given) && given > 0 ? given : defaultDelegateTimeoutMs };
}

type Env = Readonly<Record<string, string | undefined>>;

export async function runCni(env: Env, io: CniIo): Promise<number> {
  const command = env['CNI_COMMAND'];
  let version = '1.1.0';
  try {
    if (command === undefined || command === '') {
      io.stderr(`CNI Plugin flannel (weft) version ${weftVersion}\nCNI protocol versions supported: ${supportedVersions.join(', ')}\n`);
      return 0;
    }
    if (command === 'VERSION') {
      io.stdout(JSON.stringify({ cniVersion: '1.1.0', supportedVersions }) + '\n');
      return 0;
    }
    const conf = parseNetConf(await io.stdin());
    version = conf.cniVersion;
    checkVersion(conf);
    switch (command) {
      case 'ADD':
        return await add(conf, env, io);
      case 'DEL':
        return await del(conf, env, io);
      case 'CHECK':
        return await check(conf, env, io.host);
      case 'STATUS':
        return await status(conf, env, io.host);
      case 'GC':
        return await gc(conf, env, io);
      default:
        throw new CniError(CniCodes.INVALID_ENV, `unknown CNI_COMMAND: ${command}`);
    }
  } catch (err) {
    const e = err instanceof CniError ? err : new CniError(CniCodes.FLANNEL, (err as Error).message);
    io.stdout(e.toJson(supportedVersions.includes(version as never) ? version : '1.1.0'));
    return 1;
  }
}

async function add(conf: FlannelNetConf, env: Env, io: CniIo): Promise<number> {
  checkEnv(env, ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH']);
  const { host } = io;
  let parsed: ParsedSubnetEnv;
  try {
    parsed = parseSubnetEnv(await host.readFile(conf.subnetFile, maxSubnetEnvBytes));
  } catch (err) {
    // The agent has not written it yet: the runtime should retry, as it does for flannel.
    if ((err as { code?: unknown }).code === 'ENOENT') throw new CniError(CniCodes.TRY_AGAIN_LATER, `failed to load flannel 'subnet.env' file: open ${conf.subnetFile}: no such file or directory. Check the flannel pod log for this node.`);
    throw new CniError(CniCodes.FLANNEL, `failed to load flannel 'subnet.env' file: cannot read subnet file ${conf.subnetFile}: ${(err as Error).message}. Check the flannel pod log for this node.`);
  }
  const delegate = buildDelegateConfig(conf, requireSubnetEnv(parsed, conf.subnetFile));
  const bytes = sortedJson(delegate);
  const plugin = await findPlugin(host, delegate['type'] as string, env['CNI_PATH']!);
  // Saved before the delegate runs, so that the runtime's DEL after a failed ADD can clean up.
  await saveState(host, attachment(conf, env), bytes);
  const result = await execDelegate(host, plugin, 'ADD', bytes, env, delegateLimits(env));
  if (result.stderr) io.stderr(result.stderr);
  // Before the result reaches the runtime, which then starts the pod's containers.
  const pod = podOf(env);
  if (pod) await announce(conf.subnetFile, { op: 'add', ...pod, containerId: env['CNI_CONTAINERID']!, ips: resultIps(result.stdout) }, env, io.stderr);
  io.stdout(result.stdout);
  return 0;
}

async function del(conf: FlannelNetConf, env: Env, io: CniIo): Promise<number> {
  checkEnv(env, ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH']);
  const { host } = io;
  const saved = await loadState(host, attachment(conf, env));
  if (saved === undefined) return 0;
  let type: unknown;
  try {
    const parsed: unknown = JSON.parse(saved);
    type = isJsonObject(parsed) ? parsed['type'] : undefined;
  } catch (err) {
    io.stderr(`failed to parse netconf: ${(err as Error).message}`);
    return 0;
  }
  if (typeof type !== 'string') {
    io.stderr('failed to parse netconf: saved delegate config has no type');
    return 0;
  }
  await execDelegate(host, await findPlugin(host, type, env['CNI_PATH']!), 'DEL', saved, env, delegateLimits(env));
  await removeState(host, attachment(conf, env));
  const pod = podOf(env);
  if (pod) await announce(conf.subnetFile, { op: 'del', ...pod, containerId: env['CNI_CONTAINERID']!, ips: [] }, env, io.stderr);
  return 0;
}

/**
 * CHECK: the container was added through this plugin and the node's subnet is still the one its
 * address came from. The delegate's own CHECK is not called: the bridge plugin's CHECK rejects the
 * gateway-less routes that flannel's IPAM section uses (seen with containernetworking-plugins
 * 1.1.1), so it would fail for every pod; flannel's plugin does not call it either.
 */
async function check(conf: FlannelNetConf, env: Env, host: CniHost): Promise<number> {
  if (!versionAtLeast(conf.cniVersion, '0.4.0')) throw new CniError(CniCodes.INCOMPATIBLE_VERSION, 'config version does not allow CHECK');
  checkEnv(env, ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH']);
  const saved = await loadState(host, attachment(conf, env));
  if (saved === undefined) throw new CniError(CniCodes.UNKNOWN_CONTAINER, `no saved state for container ${env['CNI_CONTAINERID']}: it was never added through this plugin`);
  const ranges = savedRanges(saved);
  const current = await readSubnet(host, conf.subnetFile);
  for (const subnet of [current?.subnet, current?.ipv6Subnet]) {
    if (!subnet) continue;
    const want = formatCidr(subnet);
    if (!ranges.includes(want)) {
      throw new CniError(CniCodes.FLANNEL, `the node's subnet is now ${want}, not the one this container's address came from; recreate the pod`);
    }
  }
  return 0;
}

async function status(conf: FlannelNetConf, env: Env, host: CniHost): Promise<number> {
  if (!versionAtLeast(conf.cniVersion, '1.1.0')) throw new CniError(CniCodes.INCOMPATIBLE_VERSION, 'config version does not allow STATUS');
  checkEnv(env, ['CNI_PATH']);
  const parsed = await readSubnet(host, conf.subnetFile);
  if (!parsed || (parsed.networks.length === 0 && parsed.ipv6Networks.length === 0)) {
    throw new CniError(CniCodes.NOT_AVAILABLE, `the weft agent is not ready on this node: ${conf.subnetFile} is missing`);
  }
  requireSubnetEnv(parsed, conf.subnetFile);
  return 0;
}

async function gc(conf: FlannelNetConf, env: Env, io: CniIo): Promise<number> {
  if (!versionAtLeast(conf.cniVersion, '1.1.0')) throw new CniError(CniCodes.INCOMPATIBLE_VERSION, 'config version does not allow GC');
  checkEnv(env, ['CNI_PATH']);
  const valid = conf.raw['cni.dev/valid-attachments'];
  // Without the list, GC would delete every attachment: that is not what a runtime asks for.
  if (!Array.isArray(valid)) throw new CniError(CniCodes.INVALID_CONFIG, 'GC needs cni.dev/valid-attachments (the attachments to keep); nothing was removed');
  // The attachments to keep, of this network (GC is per network: another network's state is not ours).
  const keep = new Set(
    valid.flatMap((a: unknown) => (isJsonObject(a) && typeof a['containerID'] === 'string' ? [`${a['containerID']}/${typeof a['ifname'] === 'string' ? a['ifname'] : ''}`, `${a['containerID']}/`] : [])),
  );
  const { host } = io;
  for (const { containerId, ifname } of await listState(host, conf.dataDir, conf.name)) {
    if (keep.has(`${containerId}/${ifname ?? ''}`)) continue;
    // flannel's own files do not say which interface: the runtime's, else the usual one.
    const at = { dataDir: conf.dataDir, network: conf.name, containerId, ifname: ifname ?? env['CNI_IFNAME'] ?? 'eth0' };
    try {
      const saved = await loadState(host, at);
      const parsed: unknown = saved === undefined ? undefined : JSON.parse(saved);
      const type = isJsonObject(parsed) ? parsed['type'] : undefined;
      if (typeof type === 'string' && saved !== undefined) {
        await execDelegate(host, await findPlugin(host, type, env['CNI_PATH']!), 'DEL', saved, { ...env, CNI_CONTAINERID: containerId, CNI_IFNAME: at.ifname }, delegateLimits(env));
      }
    } catch (err) {
      io.stderr(`gc: delegate DEL for ${containerId} (${at.ifname}) failed: ${(err as Error).message}\n`);
    }
    await removeState(host, at);
  }
  return 0;
}

/** subnet.env as the agent wrote it, or undefined when it cannot be read. */
async function readSubnet(host: CniHost, path: string): Promise<ParsedSubnetEnv | undefined> {
  return host.readFile(path, maxSubnetEnvBytes).then(parseSubnetEnv, () => undefined);
}

function attachment(conf: FlannelNetConf, env: Env): Attachment {
  return { dataDir: conf.dataDir, network: conf.name, containerId: env['CNI_CONTAINERID']!, ifname: env['CNI_IFNAME']! };
}

/** The subnets of the `ipam.ranges` of a saved delegate config (what CHECK compares). */
function savedRanges(saved: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(saved);
  } catch {
    throw new CniError(CniCodes.DECODE_FAILURE, 'the saved delegate config of this container is not JSON');
  }
  const ipam = isJsonObject(parsed) ? parsed['ipam'] : undefined;
  const ranges = isJsonObject(ipam) ? ipam['ranges'] : undefined;
  if (!Array.isArray(ranges)) return [];
  return ranges.flatMap((set: unknown) =>
    Array.isArray(set) ? set.flatMap((r: unknown) => (isJsonObject(r) && typeof r['subnet'] === 'string' ? [r['subnet']] : [])) : [],
  );
}
