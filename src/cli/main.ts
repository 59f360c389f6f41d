/**
 * The `weft` executable: `main(argv, env)` returns the exit code. The only module that touches
 * process.exit, process.argv, process.env and signals.
 */
import { accessSync, closeSync, constants, readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { FdHandover, handoverEnv } from '../core/handover.js';
import { ErrorCodes, WeftError, errorMessage, isWeftError } from '../core/errors.js';
import { parseNetworkConfig } from '../config/network-config.js';
import { formatCidr } from '../ip/cidr.js';
import { formatIp } from '../ip/ip.js';
import { parseFlags, usage } from './flags.js';
import { agentFlags } from './options.js';
import { type StatusReport, formatStatus } from './status-report.js';
import { fetchStatus, statusUrl } from './status-client.js';
import { version } from '../core/version.js';
import type { Io } from './io.js';
import { runAgent } from './daemon.js';
import { systemRootsEnv } from './system-roots.js';
import { onStopSignals } from './stop-signals.js';
import type * as Cleanup from './cleanup.js';
import type * as Leases from './leases.js';
import { createRequire } from 'node:module';

// The tools' commands are loaded when run: the agent's start-up does not compile them.
const require = createRequire(import.meta.url);

export type { Io } from './io.js';

const help = `weft ${version}: a flannel-compatible overlay network agent

Usage: weft <command> [flags]

Commands:
  agent            the node agent, flanneld's replacement (flags: flanneld's; see weft agent -h)
  leases           list the subnet leases in etcd (flags: the --etcd-* flags of flanneld; --json)
  config check F   validate a network config file (net-conf.json; '-' reads stdin) as flanneld would
  status           what the agent on this machine knows: lease, registry, peers (its --healthz-ip/-port; --json)
  doctor           checks this node for the problems flannel users hit, each with what to do (--json)
  cleanup          removes flannel's devices, rules and subnet file from this node (uninstall; --dry-run)
  version          print the version, the commit it was built from, the architecture and Node.js
  help             this text
`;

export async function main(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: Io): Promise<number> {
  // Installed as `flanneld`, weft is the agent with flanneld's command line, so units work unchanged.
  if (env['WEFT_ARGV0'] === 'flanneld') return runAgent(argv, env, io);
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'version':
      case '--version':
        io.stdout(`${version} (commit ${builtFrom()}, linux/${process.arch}, Node.js ${process.version})\n`);
        return 0;
      case undefined:
      case 'help':
      case '-h':
      case '--help':
        io.stdout(help);
        return 0;
      case 'agent':
        return await runAgent(rest, env, io);
      case 'leases':
        return await (require('./leases.js') as typeof Leases).leasesCommand(rest, env, io);
      case 'config':
        return await configCommand(rest, io);
      case 'status':
        return await statusCommand(rest, env, io);
      case 'doctor':
        return await doctorCommand(rest, env, io);
      case 'cleanup':
        return await (require('./cleanup.js') as typeof Cleanup).cleanupCommand(rest, env, io);
      default:
        io.stderr(`weft: unknown command ${JSON.stringify(command)}\n\n${help}`);
        return 2;
    }
  } catch (err) {
    if (io.signal.aborted) return 130;
    io.stderr(`weft ${command}: ${errorMessage(err)}\n`);
    return isWeftError(err, 'WEFT_ERR_CONFIG') ? 2 : 1;
  }
}

async function configCommand(argv: readonly string[], io: Io): Promise<number> {
  const [sub, file, ...extra] = argv;
  const usageText = 'Usage: weft config check <net-conf.json | ->\n\nChecks a network config as the agent would (etcd mode: flannel\'s defaults and checks, then\nthe backend and its options); prints the computed subnet ranges and the traffic rule mode.\n';
  if (sub === 'check' && (file === '-h' || file === '--help' || file === '-help')) {
    io.stdout(usageText);
    return 0;
  }
  if (sub !== 'check' || file === undefined || extra.length > 0) {
    io.stderr(usageText);
    return 2;
  }
  let text: string;
  try {
    text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  } catch (err) {
    throw new WeftError(ErrorCodes.CONFIG, `cannot read ${file}: ${errorMessage(err)}`, { cause: err });
  }
  const config = parseNetworkConfig(text, 'etcd');
  // Loaded here: the backends are the agent's code, which the other commands do not need.
  const { checkBackend } = await import('../backend/registry.js');
  checkBackend(config);
  for (const w of config.warnings) io.stderr(`warning: ${w}\n`);
  const lines = [`backend: ${config.backend.type}`, `traffic rules: ${config.enableNFTables ? 'nftables (EnableNFTables)' : 'iptables'}`];
  for (const [label, range] of [['IPv4', config.ipv4], ['IPv6', config.ipv6]] as const) {
    if (!range) continue;
    lines.push(`${label} network ${formatCidr(range.network)}: /${range.subnetLen} subnets from ${formatIp(range.subnetMin)} to ${formatIp(range.subnetMax)}`);
  }
  io.stdout(lines.join('\n') + '\n');
  return 0;
}

/**
 * `weft status`: asks the local agent's health server (found with the agent's own --healthz-ip and
 * --healthz-port flags and FLANNELD_* variables, so that several agents on one machine never mix)
 * for what it knows, and prints it.
 */
async function statusCommand(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: Io): Promise<number> {
  const table = [
    ...agentFlags.filter((f) => f.name === 'healthz-ip' || f.name === 'healthz-port'),
    { name: 'json', kind: 'bool', default: false, doc: 'print the agent\'s report as JSON' },
  ] as const;
  const flags = parseFlags(table, argv, env);
  if (flags.help) {
    io.stdout(`Usage: weft status [flags]\n\n${usage(table)}`);
    return 0;
  }
  const port = flags.values['healthz-port'];
  if (port <= 0 || port > 65535) {
    io.stderr('weft status: no port to ask: give the port of the agent\'s health server, as the agent got it (--healthz-port=8471, or FLANNELD_HEALTHZ_PORT in the environment); an agent without one serves no status\n');
    return 2;
  }
  const url = statusUrl(flags.values['healthz-ip'], port);
  let report: StatusReport;
  try {
    report = await fetchStatus(url, io.signal);
  } catch (err) {
    io.stderr(`weft status: no weft agent answers at ${url} (${errorMessage(err)}); is it running, with --healthz-port=${port}?\n`);
    return 1;
  }
  io.stdout(flags.values.json ? JSON.stringify(report, null, 2) + '\n' : formatStatus(report));
  return report.registry.healthy ? 0 : 1;
}

/** `weft doctor`: one verdict per check; exit 1 when any fails. Reads the agent's own flags and FLANNELD_* variables. */
async function doctorCommand(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: Io): Promise<number> {
  const table = [
    ...agentFlags.filter((f) => f.name === 'subnet-file' || f.name === 'healthz-ip' || f.name === 'healthz-port'),
    { name: 'json', kind: 'bool', default: false, doc: 'print the verdicts as JSON' },
  ] as const;
  const flags = parseFlags(table, argv, env);
  if (flags.help) {
    io.stdout(`Usage: weft doctor [flags]\n\nWith --healthz-port, it also asks the agent on this machine (leases, routes, public IPs).\n\n${usage(table)}`);
    return 0;
  }
  const { doctor, formatVerdicts } = await import('./doctor.js');
  const verdicts = await doctor({ subnetFile: flags.values['subnet-file'], healthzIp: flags.values['healthz-ip'], healthzPort: flags.values['healthz-port'], signal: io.signal });
  io.stdout(flags.values.json ? JSON.stringify(verdicts, null, 2) + '\n' : formatVerdicts(verdicts));
  return verdicts.some((v) => v.result === 'fail') ? 1 : 0;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Runs the command line of this process: argv and env in, exit code out; SIGINT/SIGTERM stop it
 * cleanly. SIGHUP restarts the agent gracefully: it stops as on SIGTERM and the process executes
 * itself again (new code from disk, same pid, same flags), handing its udp TUN device and socket
 * across open, so that the data path loses no packet.
 */
export async function runProcess(): Promise<void> {
  const ctl = new AbortController();
  const argv = process.argv.slice(2);
  const handover = new FdHandover(process.env[handoverEnv]);
  delete process.env[handoverEnv];
  // Before any TLS connection: OpenSSL reads these when it first needs the default CAs.
  const trust = systemRootsEnv(process.env, readableFile);
  Object.assign(process.env, trust);
  const restarting = onStopSignals(process, ctl, { restartOnHangup: process.env['WEFT_ARGV0'] === 'flanneld' || argv[0] === 'agent' });
  const io: Io = { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t), signal: ctl.signal, handover };
  const code = await main(argv, process.env, io);
  for (const fd of handover.untaken()) closeSync(fd);
  if (restarting() && code === 0) {
    const passed = handover.outgoing();
    process.stderr.write(`weft: restarting (${process.execPath} ${argv.join(' ')})${passed ? `, handing over ${passed}` : ''}\n`);
    try {
      if (!process.execve) throw new WeftError(ErrorCodes.INTERNAL, 'this Node.js has no process.execve');
      // Without what this process filled in: the restarted agent chooses the bundle again (it may have changed on disk).
      const env: NodeJS.ProcessEnv = { ...process.env, ...(passed ? { [handoverEnv]: passed } : {}) };
      for (const key of Object.keys(trust)) delete env[key];
      process.execve(process.execPath, restartArgv(), env);
    } catch (err) {
      process.stderr.write(`weft: could not restart: ${errorMessage(err)}\n`);
      process.exitCode = 1;
      return;
    }
  }
  process.exitCode = code;
}

function readableFile(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return statSync(path).isFile();
  } catch {
    return false; // absent, unreadable or under a file: Go tries the next bundle
  }
}

/**
 * The command line that starts this process again. argv[0] keeps the name it was started by: the
 * single executable (dist/cni/weft) is a CNI plugin under any name but flanneld and weft. A
 * single executable carries its Node options inside and has no script path.
 */
function restartArgv(): string[] {
  const sea = process.getBuiltinModule('node:sea') as { isSea(): boolean } | undefined;
  return sea?.isSea() ? [process.argv0, ...process.argv.slice(2)] : [process.argv0, ...process.execArgv, ...process.argv.slice(1)];
}

/** The commit weft was built from, as `make build` records it beside the JavaScript (dist/build.json). */
function builtFrom(): string {
  try {
    const commit = (JSON.parse(readFileSync(new URL('../../build.json', import.meta.url), 'utf8')) as { commit?: unknown }).commit;
    return typeof commit === 'string' && /^[0-9a-f]{7,40}$/.test(commit) ? commit : 'unknown';
  } catch {
    return 'unknown';
  }
}
