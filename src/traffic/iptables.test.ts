/**
 * Iptables' decisions with its command runner injected: a small model of iptables-save,
 * iptables-restore --noflush and -D, per family and table (real iptables in traffic.netns.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../ip/cidr.js';
import { recordingLogger } from '../testing/recording-logger.js';
import type { Exec } from './exec.js';
import { Iptables } from './iptables.js';
import { splitArgs } from './iptables-render.js';

/** Chains with their rules, per command family (`iptables`, `ip6tables`) and table. */
function fakeIptables() {
  const tables = new Map<string, Map<string, string[]>>();
  const table = (cmd: string, name: string): Map<string, string[]> => {
    const key = `${cmd.startsWith('ip6') ? 6 : 4} ${name}`;
    if (!tables.has(key)) tables.set(key, new Map([['POSTROUTING', []], ['FORWARD', []]]));
    return tables.get(key)!;
  };
  const calls: string[] = [];
  const exec: Exec = async (cmd, args, input) => {
    calls.push(`${cmd} ${args.join(' ')}`);
    if (cmd.endsWith('-save')) {
      const t = table(cmd, args[args.indexOf('-t') + 1]!);
      return [...t].flatMap(([chain, rules]) => [`:${chain} - [0:0]`, ...rules.map((r) => `-A ${chain} ${r}`)]).join('\n') + '\n';
    }
    if (cmd.endsWith('-restore')) {
      let t: Map<string, string[]> | undefined;
      for (const line of (input ?? '').split('\n')) {
        if (line.startsWith('*')) t = table(cmd, line.slice(1));
        else if (line.startsWith(':')) t!.set(line.slice(1).split(' ')[0]!, []);
        else if (line.startsWith('-A ')) {
          const [, chain, ...rest] = line.split(' ');
          t!.get(chain!)!.push(rest.join(' '));
        }
      }
      return '';
    }
    const t = table(cmd, args[args.indexOf('-t') + 1]!);
    const chain = args[args.indexOf('-D') + 1]!;
    const rule = args.slice(args.indexOf('-D') + 2);
    const rules = t.get(chain)!;
    const at = rules.findIndex((r) => JSON.stringify(splitArgs(r)) === JSON.stringify(rule));
    if (at >= 0) rules.splice(at, 1);
    return '';
  };
  return { exec, tables, table, calls };
}

const v4 = { family: 4 as const, network: parseCidr('198.18.0.0/16'), subnet: parseCidr('198.18.5.0/24') };
const v6 = { family: 6 as const, network: parseCidr('2001:db8:1800::/56'), subnet: parseCidr('2001:db8:1800:5::/64') };
const rules = { masquerade: true, forward: true, randomFully: true };

test('installs each family with its own command, one jump per chain; a duplicate jump from an older agent goes', async () => {
  const f = fakeIptables();
  f.table('iptables', 'nat').get('POSTROUTING')!.push('-m comment --comment "flanneld masq" -j FLANNEL-POSTRTG', '-m comment --comment "flanneld masq" -j FLANNEL-POSTRTG');
  const ipt = new Iptables({ exec: f.exec, log: recordingLogger(), resyncMs: 1000, rules });
  await ipt.apply([v4, v6]);
  assert.equal(f.table('iptables', 'nat').get('POSTROUTING')!.length, 1);
  assert.equal(f.table('iptables', 'nat').get('FLANNEL-POSTRTG')!.length, 6);
  assert.equal(f.table('ip6tables', 'nat').get('FLANNEL-POSTRTG')!.length, 6);
  assert.ok(f.table('ip6tables', 'nat').get('FLANNEL-POSTRTG')!.some((r) => r.includes('ff00::/8')));
  assert.equal(f.table('ip6tables', 'filter').get('FLANNEL-FWD')!.length, 2);
  assert.ok(f.calls.some((c) => c.startsWith('ip6tables-restore --noflush --wait')));
});

test('a check finds a deleted rule, a deleted jump or a foreign rule in the chain and reinstalls; otherwise it writes nothing', async () => {
  const f = fakeIptables();
  const ipt = new Iptables({ exec: f.exec, log: recordingLogger(), resyncMs: 1000, rules });
  await ipt.apply([v4]);
  const restores = (): number => f.calls.filter((c) => c.includes('-restore')).length;
  const before = restores();
  assert.equal(await ipt.check(), false);
  assert.equal(restores(), before, 'nothing changed, nothing written');
  f.table('iptables', 'nat').get('FLANNEL-POSTRTG')!.splice(2, 1);
  assert.equal(await ipt.check(), true);
  assert.equal(f.table('iptables', 'nat').get('FLANNEL-POSTRTG')!.length, 6);
  f.table('iptables', 'filter').get('FORWARD')!.length = 0;
  assert.equal(await ipt.check(), true);
  assert.equal(f.table('iptables', 'filter').get('FORWARD')!.length, 1);
  f.table('iptables', 'filter').get('FLANNEL-FWD')!.push('-j DROP');
  assert.equal(await ipt.check(), true);
  assert.deepEqual(f.table('iptables', 'filter').get('FLANNEL-FWD'), ['-s 198.18.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT', '-d 198.18.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT']);
  assert.equal(await ipt.check(), false);
});

test('a listing right after the install that lacks a rule is not kept as the reference: the next check writes again', async () => {
  const f = fakeIptables();
  let sabotage = false;
  const exec: Exec = async (cmd, args, input) => {
    const out = await f.exec(cmd, args, input);
    // Someone deletes a rule between our restore and our save.
    if (sabotage && cmd.endsWith('-restore')) f.table(cmd, 'nat').get('FLANNEL-POSTRTG')?.pop();
    return out;
  };
  const ipt = new Iptables({ exec, log: recordingLogger(), resyncMs: 1000, rules: { ...rules, forward: false } });
  sabotage = true;
  await ipt.apply([v4]);
  sabotage = false;
  assert.equal(f.table('iptables', 'nat').get('FLANNEL-POSTRTG')!.length, 5);
  assert.equal(await ipt.check(), true);
  assert.equal(f.table('iptables', 'nat').get('FLANNEL-POSTRTG')!.length, 6);
});

test('a duplicated jump found by a check is repaired: exactly one is kept', async () => {
  const f = fakeIptables();
  const ipt = new Iptables({ exec: f.exec, log: recordingLogger(), resyncMs: 1000, rules });
  await ipt.apply([v4]);
  const post = f.table('iptables', 'nat').get('POSTROUTING')!;
  post.push(post[0]!);
  assert.equal(await ipt.check(), true);
  assert.equal(f.table('iptables', 'nat').get('POSTROUTING')!.length, 1);
  assert.equal(await ipt.check(), false);
});

test('two agents on one host (one per network) keep each other\'s rules: one shared mark rule, each network\'s own, no rewrites', async () => {
  const f = fakeIptables();
  const other = { family: 4 as const, network: parseCidr('198.19.0.0/16'), subnet: parseCidr('198.19.7.0/24') };
  const a = new Iptables({ exec: f.exec, log: recordingLogger(), resyncMs: 1000, rules });
  const b = new Iptables({ exec: f.exec, log: recordingLogger(), resyncMs: 1000, rules });
  await a.apply([v4]);
  await b.apply([other]);
  const masq = (): string[] => f.table('iptables', 'nat').get('FLANNEL-POSTRTG')!;
  assert.equal(masq().length, 11, 'the mark rule once, five of each network');
  assert.match(masq()[0]!, /--mark 0x4000\/0x4000/);
  assert.equal(masq().filter((r) => r.includes('198.18.0.0/16')).length, 5);
  assert.equal(masq().filter((r) => r.includes('198.19.0.0/16')).length, 5);
  assert.equal(f.table('iptables', 'filter').get('FLANNEL-FWD')!.length, 4);
  assert.equal(f.table('iptables', 'nat').get('POSTROUTING')!.length, 1, 'one jump');
  const restores = (): number => f.calls.filter((c) => c.includes('-restore')).length;
  const before = restores();
  for (let i = 0; i < 3; i++) assert.deepEqual([await a.check(), await b.check()], [false, false]);
  assert.equal(restores(), before, 'neither rewrites the other\'s layout');
  // One agent's rule deleted: that agent repairs it, and the other's rules stay.
  masq().splice(masq().findIndex((r) => r.includes('198.19.0.0/16')), 1);
  assert.deepEqual([await a.check(), await b.check()], [false, true]);
  assert.equal(masq().length, 11);
  // A lease change of one agent drops its old subnet's rules only.
  await a.apply([{ ...v4, subnet: parseCidr('198.18.9.0/24') }]);
  assert.equal(masq().filter((r) => r.includes('198.18.5.0/24')).length, 0);
  assert.equal(masq().filter((r) => r.includes('198.19.7.0/24')).length, 3);
  assert.deepEqual([await a.check(), await b.check()], [false, false]);
});
