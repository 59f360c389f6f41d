/**
 * Both traffic managers against the real tools in a throwaway namespace: flannel's nftables tables
 * as expected, rules and tables deleted by hand restored on resync, and a node switched from one
 * mode to the other and back left with exactly one set of flannel's rules and everything else as
 * it was.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../ip/cidr.js';
import { createNetns, deleteNetns, netnsSkipReason, nsExec, nsName } from '../testing/netns.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import { type Exec, execCommand } from './exec.js';
import { Iptables } from './iptables.js';
import { Nftables } from './nftables.js';
import { NftOwner } from './nft-owner.js';
import type { OwnedTable } from './nft-table.js';

const skip = netnsSkipReason();
const v4 = { family: 4 as const, network: parseCidr('198.18.0.0/16'), subnet: parseCidr('198.18.5.0/24') };
const v6 = { family: 6 as const, network: parseCidr('2001:db8:1800::/56'), subnet: parseCidr('2001:db8:1800:5::/64') };
const rules = { masquerade: true, forward: true, randomFully: true };

type TestContext = { after(fn: () => Promise<void> | void): void };

async function namespace(t: TestContext): Promise<{ ns: string; exec: Exec; ctl: AbortController }> {
  const ns = nsName('tr');
  await createNetns(ns);
  const ctl = new AbortController();
  t.after(async () => {
    ctl.abort();
    await deleteNetns(ns);
  });
  return { ns, exec: (cmd, args, input) => execCommand('ip', ['netns', 'exec', ns, cmd, ...args], input), ctl };
}

interface NftItem {
  chain?: { name: string; type?: string; hook?: string; prio?: number; policy?: string };
  rule?: { chain: string; handle: number };
}

async function nftList(ns: string, family: 'ip' | 'ip6', table: string): Promise<NftItem[] | undefined> {
  try {
    return (JSON.parse(await nsExec(ns, 'nft', ['-j', 'list', 'table', family, table])) as { nftables: NftItem[] }).nftables;
  } catch {
    return undefined;
  }
}

const ruleCount = (items: NftItem[] | undefined, chain: string): number => (items ?? []).filter((i) => i.rule?.chain === chain).length;

test('nftables: flannel\'s tables and chains; a deleted rule and a deleted table come back on resync', { skip, timeout: 60_000 }, async (t) => {
  const { ns, exec, ctl } = await namespace(t);
  const nft = await Nftables.create({ exec, log: recordingLogger(), resyncMs: 50, rules });
  await nft.apply([v4, v6]);
  for (const [family, table] of [['ip', 'flannel-ipv4'], ['ip6', 'flannel-ipv6']] as const) {
    const items = await nftList(ns, family, table);
    const chains = items!.flatMap((i) => (i.chain ? [i.chain] : [])).map((c) => [c.name, c.type, c.hook, c.prio, c.policy]);
    assert.deepEqual(chains, [
      ['postrtg', 'nat', 'postrouting', 100, 'accept'],
      ['forward', 'filter', 'forward', 0, 'accept'],
    ]);
    // nft 1.0's JSON leaves comments out; its text has them.
    const text = await nsExec(ns, 'nft', ['list', 'table', family, table]);
    for (const comment of [`rules for ${table}`, 'chain to manage traffic masquerading by flannel', 'chain to accept flannel traffic']) assert.ok(text.includes(`comment "${comment}"`), comment);
    assert.equal(ruleCount(items, 'postrtg'), 6);
    assert.equal(ruleCount(items, 'forward'), 2);
  }
  const text = await nsExec(ns, 'nft', ['list', 'table', 'ip', 'flannel-ipv4']);
  assert.match(text, /meta mark 0x00004000 return/);
  assert.match(text, /ip saddr 198\.18\.0\.0\/16 ip daddr != 224\.0\.0\.0\/4 masquerade fully-random/, 'this kernel takes fully-random, so the probe keeps it');
  assert.match(text, /ip saddr != 198\.18\.5\.0\/24 ip daddr 198\.18\.0\.0\/16 return/);

  const resync = nft.run(ctl.signal);
  const victim = (await nftList(ns, 'ip', 'flannel-ipv4'))!.find((i) => i.rule?.chain === 'postrtg')!.rule!.handle;
  await nsExec(ns, 'nft', ['delete', 'rule', 'ip', 'flannel-ipv4', 'postrtg', 'handle', String(victim)]);
  await waitUntil('the deleted rule is back', async () => ruleCount(await nftList(ns, 'ip', 'flannel-ipv4'), 'postrtg') === 6);
  await nsExec(ns, 'nft', ['delete', 'table', 'ip6', 'flannel-ipv6']);
  await waitUntil('the deleted table is back', async () => ruleCount(await nftList(ns, 'ip6', 'flannel-ipv6'), 'forward') === 2);
  // A changed lease replaces the rules in one transaction.
  await nft.apply([{ ...v4, subnet: parseCidr('198.18.9.0/24') }, v6]);
  assert.match(await nsExec(ns, 'nft', ['list', 'table', 'ip', 'flannel-ipv4']), /ip saddr 198\.18\.9\.0\/24 ip daddr 198\.18\.0\.0\/16 return/);
  assert.doesNotMatch(await nsExec(ns, 'nft', ['list', 'table', 'ip', 'flannel-ipv4']), /198\.18\.5\.0/);
  ctl.abort();
  await resync;
});

test('switching iptables → nftables → iptables leaves exactly one set of flannel\'s rules, and nothing else changed', { skip, timeout: 60_000 }, async (t) => {
  const { ns, exec } = await namespace(t);
  const log = recordingLogger();
  // Someone else's rules, which no mode may touch.
  for (const cmd of ['iptables', 'ip6tables']) {
    await nsExec(ns, cmd, ['-t', 'nat', '-N', 'OTHER-POSTRTG']);
    await nsExec(ns, cmd, ['-t', 'nat', '-A', 'POSTROUTING', '-j', 'OTHER-POSTRTG']);
    await nsExec(ns, cmd, ['-t', 'filter', '-A', 'FORWARD', '-s', cmd === 'iptables' ? '198.51.100.0/24' : '2001:db8:113::/64', '-j', 'ACCEPT']);
  }
  await nsExec(ns, 'nft', ['add', 'table', 'inet', 'someone-else']);
  const others = async (): Promise<string> => {
    const saves = await Promise.all(['iptables-save', 'ip6tables-save'].map((c) => nsExec(ns, c, [])));
    const lines = saves.join('\n').split('\n').filter((l) => !l.startsWith('#') && !l.includes('FLANNEL') && !l.startsWith('*') && l !== 'COMMIT' && l !== '');
    return `${lines.map((l) => l.replace(/\[\d+:\d+\]/, '')).join('\n')}\n${(await nsExec(ns, 'nft', ['list', 'tables'])).split('\n').filter((l) => !l.includes('flannel-')).join('\n')}`;
  };
  const flannelState = async (): Promise<{ iptables: number; nft: number }> => {
    const saves = (await Promise.all(['iptables-save', 'ip6tables-save'].map((c) => nsExec(ns, c, [])))).join('\n');
    const tables = (await nsExec(ns, 'nft', ['list', 'tables'])).split('\n').filter((l) => l.includes('flannel-')).length;
    return { iptables: saves.split('\n').filter((l) => l.includes('FLANNEL')).length, nft: tables };
  };
  const before = await others();

  const ipt = new Iptables({ exec, log, resyncMs: 1000, rules });
  await ipt.removeOtherMode();
  await ipt.apply([v4, v6]);
  // Per family: 2 chain lines, 6 + 2 rules, 2 jumps.
  assert.deepEqual(await flannelState(), { iptables: 24, nft: 0 });

  const nft = await Nftables.create({ exec, log, resyncMs: 1000, rules });
  await nft.removeOtherMode();
  await nft.apply([v4, v6]);
  assert.deepEqual(await flannelState(), { iptables: 0, nft: 2 }, 'flannel\'s iptables chains and jumps are gone, FLANNEL-FWD included');

  const back = new Iptables({ exec, log, resyncMs: 1000, rules });
  await back.removeOtherMode();
  await back.apply([v4, v6]);
  assert.deepEqual(await flannelState(), { iptables: 24, nft: 0 });
  assert.equal(await others(), before, 'no other table, chain or rule was touched');
});

test('an owner of its own table beside flannel\'s (sets and all, as a policy engine would): real nft takes the text, and a set element or rule deleted by hand comes back', { skip, timeout: 60_000 }, async (t) => {
  const { ns, exec } = await namespace(t);
  const log = recordingLogger();
  const flannel = await Nftables.create({ exec, log, resyncMs: 50, rules });
  await flannel.apply([v4]);
  const owner = new NftOwner({ exec, log });
  const table: OwnedTable = {
    family: 'inet',
    name: 'weft-owner-test',
    comment: 'a second owner',
    sets: [
      { name: 'peers4', type: 'ipv4_addr', flags: ['interval'], elements: ['198.18.1.0/24', '198.18.2.5'] },
      { name: 'ports', type: 'inet_service', elements: ['80', '443'] },
      { name: 'empty', type: 'ipv6_addr', elements: [] },
    ],
    chains: [{ name: 'ingress', base: { type: 'filter', hook: 'forward', priority: 'filter - 1', policy: 'accept' }, rules: ['ip saddr @peers4 tcp dport @ports accept', 'ip6 saddr @empty drop'] }],
  };
  await owner.install([table]);
  assert.equal(await owner.check(), false, 'nothing changed');
  await nsExec(ns, 'nft', ['delete', 'element', 'inet', 'weft-owner-test', 'peers4', '{ 198.18.2.5 }']);
  assert.equal(await owner.check(), true);
  assert.match(await nsExec(ns, 'nft', ['list', 'set', 'inet', 'weft-owner-test', 'peers4']), /198\.18\.2\.5/);
  assert.equal(await flannel.check(), false, 'flannel\'s tables were not touched');
  await nsExec(ns, 'nft', ['flush', 'chain', 'inet', 'weft-owner-test', 'ingress']);
  assert.equal(await owner.check(), true);
  assert.equal(await owner.check(), false);
  await owner.remove([table]);
  await assert.rejects(nsExec(ns, 'nft', ['list', 'table', 'inet', 'weft-owner-test']));
  assert.ok(await nftList(ns, 'ip', 'flannel-ipv4'), 'and removing it leaves flannel\'s');
});

test('a switch to nftables on a legacy-iptables host removes flannel\'s chains from the legacy tables too, and creates no legacy table that was not there', { skip, timeout: 60_000 }, async (t) => {
  const { ns, exec } = await namespace(t);
  const log = recordingLogger();
  // An agent in iptables mode on a legacy host left its chains in the legacy nat and filter tables.
  const legacy = new Iptables({ exec, log, resyncMs: 1000, rules, variant: 'legacy' });
  await legacy.apply([v4]);
  const legacySave = (): Promise<string> => nsExec(ns, 'iptables-legacy-save', []);
  assert.match(await legacySave(), /FLANNEL-POSTRTG/);
  assert.doesNotMatch(await legacySave(), /\*mangle/, 'the legacy mangle table was never made');
  const nft = await Nftables.create({ exec, log, resyncMs: 1000, rules });
  await nft.removeOtherMode();
  assert.doesNotMatch(await legacySave(), /FLANNEL/, 'flannel\'s legacy chains and jumps are gone');
  assert.doesNotMatch(await legacySave(), /\*mangle/, 'and looking did not create a legacy table');
  assert.doesNotMatch(await nsExec(ns, 'ip6tables-legacy-save', []), /\*(nat|filter)/, 'no legacy IPv6 table was created either');
});
