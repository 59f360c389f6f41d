/** The choice between iptables-legacy and iptables-nft, as flannel's image makes it. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { iptablesCommand } from './iptables-render.js';
import { chooseVariant, detectIptablesVariant } from './iptables-variant.js';

const empty = '*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n';
const withHint = '*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n';
const rules = (n: number): string => `*nat\n:POSTROUTING ACCEPT [0:0]\n${'-A POSTROUTING -j RETURN\n'.repeat(n)}COMMIT\n`;

test('kubelet\'s hint decides first (nf_tables before legacy), then where the rules are, else nf_tables', () => {
  const cases: Array<[string, Parameters<typeof chooseVariant>[0], string | undefined]> = [
    ['hint in nf_tables mangle', { nftMangle: [withHint, undefined], legacy: [rules(50), empty], nft: [empty, empty] }, 'nft'],
    ['IPv6 hint in nf_tables mangle', { nftMangle: [empty, withHint], legacy: [rules(50), empty], nft: [empty, empty] }, 'nft'],
    ['hint in the legacy tables', { nftMangle: [empty, empty], legacy: [empty, withHint], nft: [rules(50), empty] }, 'legacy'],
    ['no hint, more legacy rules (Docker on legacy)', { nftMangle: [empty, empty], legacy: [rules(3), rules(1)], nft: [rules(2), empty] }, 'legacy'],
    ['no hint, as many nf_tables rules', { nftMangle: [empty, empty], legacy: [rules(2), empty], nft: [rules(1), rules(1)] }, 'nft'],
    ['nothing anywhere', { nftMangle: [empty, empty], legacy: [empty, empty], nft: [empty, empty] }, 'nft'],
    ['no hint, more legacy rules, one save failed', { nftMangle: [empty, empty], legacy: [rules(3), undefined], nft: [rules(2), undefined] }, 'legacy'],
    ['the hint\'s name in a rule is no hint chain', { nftMangle: [`*mangle\n-A X -m comment --comment ":KUBE-IPTABLES-HINT" -j RETURN\n`, empty], legacy: [rules(3), empty], nft: [rules(1), empty] }, 'legacy'],
    ['no legacy commands', { nftMangle: [empty, empty], legacy: [undefined, undefined], nft: [rules(1), empty] }, undefined],
    ['no legacy commands, hint in nf_tables', { nftMangle: [withHint, empty], legacy: [undefined, undefined], nft: [] }, 'nft'],
    ['no nft commands', { nftMangle: [undefined, undefined], legacy: [rules(1), empty], nft: [undefined, undefined] }, undefined],
  ];
  for (const [what, probe, want] of cases) assert.equal(chooseVariant(probe).variant, want, what);
  assert.match(chooseVariant({ nftMangle: [empty], legacy: [rules(3)], nft: [rules(1)] }).why, /3 against 1/);
});

test('detection runs each save once, counts a failed one as missing, and names the commands to use', async () => {
  const calls: string[] = [];
  const choice = await detectIptablesVariant(async (cmd, args) => {
    calls.push([cmd, ...args].join(' '));
    if (cmd.startsWith('ip6tables-legacy')) throw new Error('no ip6 legacy');
    return cmd === 'iptables-legacy-save' ? withHint : empty;
  });
  assert.equal(choice.variant, 'legacy');
  assert.deepEqual(calls, ['iptables-nft-save -t mangle', 'ip6tables-nft-save -t mangle', 'iptables-legacy-save', 'ip6tables-legacy-save', 'iptables-nft-save', 'ip6tables-nft-save']);
  assert.deepEqual([iptablesCommand(4, '-restore', 'legacy'), iptablesCommand(6, '-save', 'nft'), iptablesCommand(4, ''), iptablesCommand(6, '', 'legacy')], ['iptables-legacy-restore', 'ip6tables-nft-save', 'iptables', 'ip6tables-legacy']);
});

test('a hint in the nf_tables mangle tables ends the detection after the two saves that found it', async () => {
  const calls: string[] = [];
  const choice = await detectIptablesVariant(async (cmd, args) => {
    calls.push([cmd, ...args].join(' '));
    return cmd === 'ip6tables-nft-save' ? withHint : rules(50);
  });
  assert.deepEqual(choice, { variant: 'nft', why: 'kubelet\'s hint chain is in the nf_tables tables' });
  assert.deepEqual(calls, ['iptables-nft-save -t mangle', 'ip6tables-nft-save -t mangle']);
});
