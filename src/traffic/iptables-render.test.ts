import { test } from 'node:test';
import assert from 'node:assert/strict';
/** flannel's rules as iptables text, against flanneld 0.28's (spec §8.1, §8.2). */
import { iptablesCommand, iptablesRuleSets, readChain, restorePayload, splitArgs } from './iptables-render.js';
import { parseCidr } from '../ip/cidr.js';

const all = { masquerade: true, forward: true, randomFully: true };
const masqRuleSet = (network: string, subnet: string, options: { randomFully: boolean }) =>
  iptablesRuleSets([{ family: network.includes(':') ? 6 : 4, network: parseCidr(network), subnet: parseCidr(subnet) }], { ...all, forward: false, ...options })[0]!;
const forwardRuleSet = (network: string) => iptablesRuleSets([{ family: network.includes(':') ? 6 : 4, network: parseCidr(network) }], all)[0]!;

test('masquerade rules are flanneld 0.28\'s, in order, with its comments', () => {
  const set = masqRuleSet('198.18.0.0/16', '198.18.5.0/24', { randomFully: true });
  assert.equal(
    restorePayload(set, { addJump: true }),
    [
      '*nat',
      ':FLANNEL-POSTRTG - [0:0]',
      '-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 -m comment --comment "flanneld masq" -j RETURN',
      '-A FLANNEL-POSTRTG -s 198.18.5.0/24 -d 198.18.0.0/16 -m comment --comment "flanneld masq" -j RETURN',
      '-A FLANNEL-POSTRTG -s 198.18.0.0/16 -d 198.18.5.0/24 -m comment --comment "flanneld masq" -j RETURN',
      '-A FLANNEL-POSTRTG ! -s 198.18.0.0/16 -d 198.18.5.0/24 -m comment --comment "flanneld masq" -j RETURN',
      '-A FLANNEL-POSTRTG -s 198.18.0.0/16 ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully',
      '-A FLANNEL-POSTRTG ! -s 198.18.0.0/16 -d 198.18.0.0/16 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully',
      '-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG',
      'COMMIT',
      '',
    ].join('\n'),
  );
  assert.ok(!restorePayload(set, { addJump: false }).includes('-A POSTROUTING'));
  assert.deepEqual(masqRuleSet('198.18.0.0/16', '198.18.5.0/24', { randomFully: false }).rules.slice(4), [
    '-s 198.18.0.0/16 ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE',
    '! -s 198.18.0.0/16 -d 198.18.0.0/16 -m comment --comment "flanneld masq" -j MASQUERADE',
  ]);
});

test('forward rules and reading a chain back from iptables-save', () => {
  const set = forwardRuleSet('198.18.0.0/16');
  const save = [
    '*filter',
    ':FORWARD ACCEPT [0:0]',
    ':FLANNEL-FWD - [0:0]',
    '-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD',
    '-A FLANNEL-FWD -s 198.18.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT',
    '-A FLANNEL-FWD -d 198.18.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT',
    'COMMIT',
  ].join('\n');
  assert.deepEqual(readChain(save, set), { rules: set.rules.slice(), chainExists: true, jumps: 1 });
  assert.deepEqual(splitArgs(set.jump), ['-m', 'comment', '--comment', 'flanneld forward', '-j', 'FLANNEL-FWD']);
});

test('IPv6 rules come from the same description: ip6tables, the IPv6 network and subnet, ff00::/8 not masqueraded', () => {
  const set = masqRuleSet('2001:db8:1800::/56', '2001:db8:1800:5::/64', { randomFully: true });
  assert.equal(set.family, 6);
  assert.deepEqual(set.rules.slice(1), [
    '-s 2001:db8:1800:5::/64 -d 2001:db8:1800::/56 -m comment --comment "flanneld masq" -j RETURN',
    '-s 2001:db8:1800::/56 -d 2001:db8:1800:5::/64 -m comment --comment "flanneld masq" -j RETURN',
    '! -s 2001:db8:1800::/56 -d 2001:db8:1800:5::/64 -m comment --comment "flanneld masq" -j RETURN',
    '-s 2001:db8:1800::/56 ! -d ff00::/8 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully',
    '! -s 2001:db8:1800::/56 -d 2001:db8:1800::/56 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully',
  ]);
  assert.deepEqual([iptablesCommand(6, '-restore'), iptablesCommand(4, '-save'), iptablesCommand(6, '')], ['ip6tables-restore', 'iptables-save', 'ip6tables']);
  assert.equal(forwardRuleSet('2001:db8:1800::/56').family, 6);
  // Before the lease, no masquerade chain: the forward chain alone.
  assert.deepEqual(iptablesRuleSets([{ family: 4, network: parseCidr('198.18.0.0/16') }], all).map((r) => r.chain), ['FLANNEL-FWD']);
  assert.deepEqual(iptablesRuleSets([{ family: 4, network: parseCidr('198.18.0.0/16'), subnet: parseCidr('198.18.5.0/24') }], { ...all, masquerade: false, forward: false }), []);
});

test('reading a chain back: its rules, whether it exists, and how many jumps lead to it from its parent only', () => {
  const set = { chain: 'FLANNEL-FWD', parent: 'FORWARD' };
  const save = (...lines: string[]): string => ['*filter', ':FORWARD ACCEPT [0:0]', ...lines, 'COMMIT'].join('\n');
  assert.deepEqual(readChain(save(), set), { rules: [], chainExists: false, jumps: 0 });
  assert.deepEqual(readChain(save(':FLANNEL-FWD - [0:0]'), set), { rules: [], chainExists: true, jumps: 0 });
  assert.deepEqual(
    readChain(
      save(
        ':FLANNEL-FWD - [0:0]',
        '-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD',
        '-A FORWARD -j FLANNEL-FWD',
        '-A FORWARD -j ACCEPT',
        '-A INPUT -j FLANNEL-FWD',
        '-A FORWARD -j FLANNEL-FWD-OTHER',
        '-A FLANNEL-FWD -j RETURN',
      ),
      set,
    ),
    { rules: ['-j RETURN'], chainExists: true, jumps: 2 },
  );
});
