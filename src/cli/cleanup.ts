/**
 * `weft cleanup`: takes off a node what flannel and weft put on it, for an uninstall or a clean
 * switch (as `cilium cleanup`): flannel's devices (`flannel.<VNI>`, `flannel-v6.<VNI>`, `flannel0`,
 * `flannel-wg`, `flannel-wg-v6`) and the routes through them, flannel's iptables chains and
 * nftables tables in both modes, and the subnet file. Nothing else: not `cni0` and its pods, not a
 * rule or table of anyone else. Stop the agent first, or it puts everything back.
 */
import { rm, stat } from 'node:fs/promises';
import { errorMessage } from '../core/errors.js';
import { createLogger } from '../core/log.js';
import { isFlannelDevice } from '../backend/leftovers.js';
import { type Exec, execCommand, isMissingCommand } from '../traffic/exec.js';
import { presentFlannelTables, removeFlannelChains, removeFlannelTables } from '../traffic/nftables.js';
import { parseFlags, usage } from './flags.js';
import type { Io } from './io.js';
import { agentFlags } from './options.js';

export async function cleanupCommand(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: Io): Promise<number> {
  const table = [
    ...agentFlags.filter((f) => f.name === 'subnet-file'),
    { name: 'dry-run', kind: 'bool', default: false, doc: 'say what would be removed, and remove nothing' },
  ] as const;
  const flags = parseFlags(table, argv, env);
  if (flags.help) {
    io.stdout(`Usage: weft cleanup [flags]\n\nRemoves flannel's devices with their routes, its iptables chains and nftables tables, and the\nsubnet file. Stop the agent first.\n\n${usage(table)}`);
    return 0;
  }
  const dry = flags.values['dry-run'];
  const say = (what: string): void => io.stdout(`${dry ? 'would remove' : 'removed'} ${what}\n`);
  let failed = 0;
  // Loaded here: the netlink addon is the agent's, which the other commands do not need.
  const { RtNetlink } = await import('../netlink/rtnetlink.js');
  const nl = new RtNetlink();
  try {
    for (const link of (await nl.links()).filter((l) => isFlannelDevice(l.name))) {
      try {
        if (!dry) await nl.deleteLink(link.index);
        say(`device ${link.name} and its routes`);
      } catch (err) {
        failed++;
        io.stderr(`weft cleanup: could not remove device ${link.name}: ${errorMessage(err)}\n`);
      }
    }
  } finally {
    nl.close();
  }
  const log = createLogger({ level: 'warn', bindings: { cmd: 'cleanup' } });
  try {
    const tables = await presentFlannelTables(execCommand).catch((err: unknown) => (isMissingCommand(err) ? [] : Promise.reject(err)));
    if (tables.length > 0 && !dry) await removeFlannelTables(execCommand, log);
    for (const t of tables) say(`nftables table ${t}`);
  } catch (err) {
    failed++;
    io.stderr(`weft cleanup: could not remove flannel's nftables tables: ${errorMessage(err)}\n`);
  }
  try {
    // The chains are read before anything is removed, so a dry run reports exactly what a run would.
    const chains = dry ? await flannelChainsPresent() : await removeFlannelChains(execCommand, log);
    for (const c of chains) say(`iptables chain ${c}`);
  } catch (err) {
    failed++;
    io.stderr(`weft cleanup: could not remove flannel's iptables chains: ${errorMessage(err)}\n`);
  }
  const file = flags.values['subnet-file'];
  for (const [what, path] of [['subnet file', file], ['backend state', `${file}.state`]] as const) {
    if (!(await stat(path).then(() => true, () => false))) continue;
    if (!dry) await rm(path, { force: true });
    say(`${what} ${path}`);
  }
  return failed > 0 ? 1 : 0;
}

/** What removeFlannelChains would remove: it run against an exec that only reads. */
async function flannelChainsPresent(): Promise<string[]> {
  const readOnly: Exec = (cmd, args, input) => (cmd.endsWith('-save') ? execCommand(cmd, args, input) : Promise.resolve(''));
  return removeFlannelChains(readOnly, createLogger({ level: 'error' }));
}
