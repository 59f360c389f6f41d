/** The policy table's counters read from `nft -j` listings as nft 1.0 writes them. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parsePolicyCounters } from './policy-counters.js';

const named = (name: string, packets: unknown) => ({ counter: { family: 'inet', table: 'weft-policy', name, handle: 9, packets, bytes: 64 } });
const pair = (from: string, to: string, packets: number) => ({ elem: { val: { concat: [from, to] }, expires: 3599, counter: { packets, bytes: 1 } } });

test('per pod chain: the packets of its named counter (`c-<chain>`); other counters and nonsense count as nothing', () => {
  const c = parsePolicyCounters([
    { table: { family: 'inet', name: 'weft-policy' } },
    named('c-in-0123456789abcdef', 7),
    named('c-out-0000000000000012', 2),
    named('other', 1000),
    named('c-forward', 1000),
    named('in-2222222222222222', 1000),
    named('c-in-1111111111111111', -1),
    named('c-in-3333333333333333', 1.5),
    { counter: ['c-in-4444444444444444'] },
    { rule: { chain: 'in-0123456789abcdef', expr: [{ counter: { packets: 5, bytes: 1 } }] } },
  ]);
  assert.deepEqual([...c.chains], [['in-0123456789abcdef', 7], ['out-0000000000000012', 2], ['in-1111111111111111', 0], ['in-3333333333333333', 0]]);
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
