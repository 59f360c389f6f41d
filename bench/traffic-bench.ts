/**
 * `make bench`, traffic rules part (needs root): in a throwaway namespace, per mode (iptables,
 * nftables), dual-stack rules with masquerade and forward rules:
 * - install: start-up's clean-up of the other mode and the first install;
 * - a resync check that finds nothing changed (what the agent spends every --iptables-resync);
 * - a resync check that finds a rule deleted by hand and puts the rules back.
 */
import { parseCidr } from '../src/ip/cidr.js';
import { createLogger } from '../src/core/log.js';
import { createNetns, deleteNetns, netnsSkipReason, nsExec, nsName } from '../src/testing/netns.js';
import { type Exec, execCommand } from '../src/traffic/exec.js';
import { Iptables } from '../src/traffic/iptables.js';
import { Nftables } from '../src/traffic/nftables.js';
import type { TrafficManager } from '../src/traffic/traffic-manager.js';

const runs = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 5) * 2);
const say = (line = ''): void => void process.stdout.write(line + '\n');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const families = [
  { family: 4 as const, network: parseCidr('198.18.0.0/16'), subnet: parseCidr('198.18.5.0/24') },
  { family: 6 as const, network: parseCidr('2001:db8:1800::/56'), subnet: parseCidr('2001:db8:1800:5::/64') },
];
const rules = { masquerade: true, forward: true, randomFully: true };
const log = createLogger({ level: 'error' });

async function timed<T>(f: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const out = await f();
  return [performance.now() - t0, out];
}

/** Deletes flannel's first masquerade rule by hand, as an operator or another agent might. */
async function deleteOneRule(ns: string, mode: TrafficManager['mode']): Promise<void> {
  if (mode === 'iptables') {
    await nsExec(ns, 'iptables', ['-t', 'nat', '-D', 'FLANNEL-POSTRTG', '1']);
    return;
  }
  const listing = JSON.parse(await nsExec(ns, 'nft', ['-j', 'list', 'chain', 'ip', 'flannel-ipv4', 'postrtg'])) as { nftables: Array<{ rule?: { handle: number } }> };
  const handle = listing.nftables.find((i) => i.rule)!.rule!.handle;
  await nsExec(ns, 'nft', ['delete', 'rule', 'ip', 'flannel-ipv4', 'postrtg', 'handle', String(handle)]);
}

async function measure(mode: TrafficManager['mode']): Promise<{ install: number[]; idle: number[]; repair: number[] }> {
  const out = { install: [] as number[], idle: [] as number[], repair: [] as number[] };
  for (let i = 0; i < runs; i++) {
    const ns = nsName('tb');
    await createNetns(ns);
    try {
      const exec: Exec = (cmd, args, input) => execCommand('ip', ['netns', 'exec', ns, cmd, ...args], input);
      const [install, manager] = await timed(async () => {
        const m: TrafficManager = mode === 'iptables' ? new Iptables({ exec, log, resyncMs: 5000, rules }) : await Nftables.create({ exec, log, resyncMs: 5000, rules });
        await m.removeOtherMode();
        await m.apply(families);
        return m;
      });
      out.install.push(install);
      const [idle, changed] = await timed(() => manager.check());
      if (changed) throw new Error(`${mode}: a check right after the install found a change`);
      out.idle.push(idle);
      await deleteOneRule(ns, mode);
      const [repair, repaired] = await timed(() => manager.check());
      if (!repaired) throw new Error(`${mode}: the check did not see the deleted rule`);
      out.repair.push(repair);
    } finally {
      await deleteNetns(ns);
    }
  }
  return out;
}

const skip = netnsSkipReason();
if (skip) {
  say(`(traffic rule benchmarks skipped: ${skip})`);
} else {
  say('### Traffic rules: install, check and repair');
  say();
  say(
    `In a fresh network namespace, flannel's masquerade and forward rules for IPv4 and IPv6 (dual-stack, \`--ip-masq\`). ` +
      `"install": the clean-up of the other mode and the first install, as at the agent's start (iptables: \`iptables-save\`, \`iptables-restore\` and \`iptables-save\` per chain and family; nftables: one \`nft -f\` transaction and one \`nft -j list table\` per family). ` +
      `"check": one resync pass (every \`--iptables-resync\` seconds, default 5) that finds nothing changed; "repair": one that finds a masquerade rule deleted by hand and puts the rules back. Medians of ${runs}.`,
  );
  say();
  say('| mode | install (ms) | check, nothing changed (ms) | check that repairs a deleted rule (ms) |');
  say('|---|---|---|---|');
  for (const mode of ['iptables', 'nftables'] as const) {
    const r = await measure(mode);
    say(`| ${mode} | ${median(r.install).toFixed(1)} | ${median(r.idle).toFixed(1)} | ${median(r.repair).toFixed(1)} |`);
  }
  say();
}
