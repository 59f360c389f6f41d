/** The policy table's counters read from `nft -j` listings as nft 1.0 writes them. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parsePolicyCounters } from './policy-counters.js';

const rule = (chain: string, ...expr: unknown[]) => ({ rule: { family: 'inet', table: 'weft-policy', chain, handle: 9, expr } });
const counter = (packets: number) => ({ counter: { packets, bytes: packets * 64 } });
const pair = (from: string, to: string, packets: number) => ({ elem: { val: { concat: [from, to] }, expires: 3599, counter: { packets, bytes: 1 } } });

test('per pod chain: the packets of every counter in it, enforcing (two reject rules) and in a dry run', () => {
  const c = parsePolicyCounters([
    { table: { family: 'inet', name: 'weft-policy' } },
    rule('in-0123456789abcdef', { match: { op: '==', left: { meta: { key: 'l4proto' } }, right: 'tcp' } }, counter(3), { reject: { type: 'tcp reset' } }),
    rule('in-0123456789abcdef', counter(4), { reject: { type: 'icmpx', expr: 'port-unreachable' } }),
    rule('out-0000000000000012', counter(2)),
    rule('out-0000000000000012', { return: null }),
    rule('forward', counter(1000)),
    rule('p0-in', counter(1000)),
    { rule: ['in-2222222222222222'] },
    rule('in-3333333333333333', [{ counter: { packets: 5 } }]),
    rule('in-1111111111111111', { counter: { packets: -1 } }, { counter: { packets: 1.5 } }, { counter: 'x' }),
  ]);
  assert.deepEqual([...c.chains], [['in-0123456789abcdef', 7], ['out-0000000000000012', 2], ['in-3333333333333333', 0], ['in-1111111111111111', 0]], 'base chains are not a pod\'s; nonsense counts as 0');
});

test('a dry run\'s pairs: source and destination by family and direction; bad or empty elements left out', () => {
  const c = parsePolicyCounters([
    { set: { family: 'inet', name: 'dry-in4', table: 'weft-policy', type: ['ipv4_addr', 'ipv4_addr'], elem: [pair('198.18.20.2', '198.18.10.2', 5), pair('198.18.20.3', '198.18.10.2', 0), pair('2001:db8::1', '198.18.10.2', 1)] } },
    { set: { name: 'dry-out6', elem: [pair('2001:db8:1800:0::2', '2001:db8:1800:1::2', 2), { elem: { val: { concat: ['2001:db8::1'] }, counter: { packets: 1 } } }] } },
    { set: { name: 'out4', elem: [pair('198.18.20.2', '198.18.10.2', 5)] } },
    { set: { name: 'dry-in4' } },
  ]);
  assert.deepEqual(c.pairs, [
    { tag: 'in', from: '198.18.20.2', to: '198.18.10.2', packets: 5 },
    { tag: 'out', from: '2001:db8:1800::2', to: '2001:db8:1800:1::2', packets: 2 },
  ]);
});
