/** The nftables rules as text, against flannel 0.28's (spec §8.5). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../ip/cidr.js';
import { flannelTableNames, flannelTables, nftMasqueradeProbe } from './nft-rules.js';
import { deleteTables, replaceTables, tableShape } from './nft-table.js';

const nftRuleset = (families: Parameters<typeof flannelTables>[0], options: Parameters<typeof flannelTables>[1]): string => replaceTables(flannelTables(families, options));
const nftShape = (families: Parameters<typeof flannelTables>[0], options: Parameters<typeof flannelTables>[1]): string => flannelTables(families, options).map(tableShape).join(' ');
const nftDeleteTables = (): string => deleteTables(flannelTableNames.map((t) => ({ family: t.nftFamily, name: t.name })));

const v4 = { family: 4 as const, network: parseCidr('198.18.0.0/16'), subnet: parseCidr('198.18.5.0/24') };
const v6 = { family: 6 as const, network: parseCidr('2001:db8:1800::/56'), subnet: parseCidr('2001:db8:1800:5::/64') };
const all = { masquerade: true, forward: true, randomFully: true };

const emptyV6 = ['add table ip6 flannel-ipv6', 'delete table ip6 flannel-ipv6', 'table ip6 flannel-ipv6 {', '  comment "rules for flannel-ipv6"', '}'];

test('IPv4: both tables replaced in one transaction; flannel\'s chains, hooks, priorities, comments and rules in its order', () => {
  assert.equal(
    nftRuleset([v4], all),
    [
      'add table ip flannel-ipv4',
      'delete table ip flannel-ipv4',
      'table ip flannel-ipv4 {',
      '  comment "rules for flannel-ipv4"',
      '  chain postrtg {',
      '    comment "chain to manage traffic masquerading by flannel"',
      '    type nat hook postrouting priority srcnat; policy accept;',
      '    meta mark 0x4000 return',
      '    ip saddr 198.18.5.0/24 ip daddr 198.18.0.0/16 return',
      '    ip saddr 198.18.0.0/16 ip daddr 198.18.5.0/24 return',
      '    ip saddr != 198.18.5.0/24 ip daddr 198.18.0.0/16 return',
      '    ip saddr 198.18.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random',
      '    ip saddr != 198.18.0.0/16 ip daddr 198.18.0.0/16 masquerade fully-random',
      '  }',
      '  chain forward {',
      '    comment "chain to accept flannel traffic"',
      '    type filter hook forward priority filter; policy accept;',
      '    ip saddr 198.18.0.0/16 accept',
      '    ip daddr 198.18.0.0/16 accept',
      '  }',
      '}',
      ...emptyV6,
      '',
    ].join('\n'),
  );
});

test('IPv6 and dual-stack: ip6 matches and ff00::/8; without --ip-masq no postrtg chain, without fully-random plain masquerade', () => {
  const dual = nftRuleset([v4, v6], all);
  assert.ok(dual.includes('table ip flannel-ipv4 {\n  comment "rules for flannel-ipv4"\n  chain postrtg {'));
  assert.ok(
    dual.includes(
      [
        'table ip6 flannel-ipv6 {',
        '  comment "rules for flannel-ipv6"',
        '  chain postrtg {',
        '    comment "chain to manage traffic masquerading by flannel"',
        '    type nat hook postrouting priority srcnat; policy accept;',
        '    meta mark 0x4000 return',
        '    ip6 saddr 2001:db8:1800:5::/64 ip6 daddr 2001:db8:1800::/56 return',
        '    ip6 saddr 2001:db8:1800::/56 ip6 daddr 2001:db8:1800:5::/64 return',
        '    ip6 saddr != 2001:db8:1800:5::/64 ip6 daddr 2001:db8:1800::/56 return',
        '    ip6 saddr 2001:db8:1800::/56 ip6 daddr != ff00::/8 masquerade fully-random',
        '    ip6 saddr != 2001:db8:1800::/56 ip6 daddr 2001:db8:1800::/56 masquerade fully-random',
        '  }',
        '  chain forward {',
        '    comment "chain to accept flannel traffic"',
        '    type filter hook forward priority filter; policy accept;',
        '    ip6 saddr 2001:db8:1800::/56 accept',
        '    ip6 daddr 2001:db8:1800::/56 accept',
        '  }',
        '}',
      ].join('\n'),
    ),
  );
  const forwardOnly = nftRuleset([v6], { masquerade: false, forward: true, randomFully: true });
  assert.ok(!forwardOnly.includes('postrtg') && forwardOnly.includes('chain forward'));
  assert.ok(!nftRuleset([v4], { ...all, randomFully: false }).includes('fully-random'));
  assert.ok(nftRuleset([{ family: 4, network: v4.network }], all).includes('chain forward') && !nftRuleset([{ family: 4, network: v4.network }], all).includes('postrtg'), 'no masquerade before the subnet is known');
  // The shape a listing must show comes from the description: no count is written twice.
  assert.equal(nftShape([v4, v6], all), 'flannel-ipv4:forward=2,postrtg=6 flannel-ipv6:forward=2,postrtg=6');
  assert.equal(nftShape([v4], { ...all, masquerade: false }), 'flannel-ipv4:forward=2 flannel-ipv6:');
  assert.equal(nftDeleteTables(), 'add table ip flannel-ipv4\ndelete table ip flannel-ipv4\nadd table ip6 flannel-ipv6\ndelete table ip6 flannel-ipv6\n');
});

test('without fully-random, plain masquerade in both renderers; the dry-run probes, with and without it', () => {
  const plain = nftRuleset([v4], { ...all, randomFully: false });
  assert.ok(plain.includes('    ip saddr 198.18.0.0/16 ip daddr != 224.0.0.0/4 masquerade\n'));
  assert.ok(plain.includes('    ip saddr != 198.18.0.0/16 ip daddr 198.18.0.0/16 masquerade\n'));
  assert.equal(nftMasqueradeProbe(true), 'table ip weft-probe {\n  chain p {\n    type nat hook postrouting priority srcnat;\n    masquerade fully-random\n  }\n}\n');
  assert.equal(nftMasqueradeProbe(false), 'table ip weft-probe {\n  chain p {\n    type nat hook postrouting priority srcnat;\n    masquerade\n  }\n}\n');
});
