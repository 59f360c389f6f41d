import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isWeftError } from '../core/errors.js';
import { DesiredState, EntryIndex } from './desired-state.js';
import type { EntryKind } from './entry-kind.js';

interface Item {
  readonly id: string;
  readonly value: number;
}
const kind = (name: string): EntryKind<Item> => ({
  name,
  key: (e) => e.id,
  list: async () => [],
  matches: (a, b) => a.value === b.value,
  put: async () => undefined,
  remove: async () => undefined,
  departs: () => false,
});
const a = kind('a');
const b = kind('b');

test('removing a program forgets exactly its entries, kind by kind', () => {
  const want = new DesiredState([a, b]);
  const one = { a: [{ id: 'x', value: 1 }], b: [{ id: 'y', value: 1 }] };
  const two = { a: [{ id: 'z', value: 2 }] };
  want.add(one);
  want.add(two);
  assert.deepEqual([...want.of(a)].map(([k]) => k), ['x', 'z']);
  want.remove(one);
  assert.deepEqual([...want.of(a)].map(([k]) => k), ['z']);
  assert.equal(want.of(b).size, 0);
});

test('a program naming a kind its backend did not declare is a bug, said at once; a kind a program leaves empty is nothing', () => {
  const want = new DesiredState([a]);
  assert.throws(() => want.add({ c: [{ id: 'x', value: 1 }] }), (err) => isWeftError(err, 'WEFT_ERR_INTERNAL') && /"c"/.test(err.message));
  want.add({ a: undefined });
  assert.equal(want.of(a).size, 0);
  want.remove({ a: undefined });
  assert.equal(want.of(a).size, 0);
});

test('two programs under one key: the later one counts, and removing it brings back the earlier', () => {
  const index = new EntryIndex<{ index: number; mac: string; dst: string }>((e) => `${e.index} ${e.mac}`);
  const first = { index: 7, mac: '0e:00:00:00:00:01', dst: 'a' };
  const second = { index: 7, mac: '0e:00:00:00:00:01', dst: 'b' };
  const key = '7 0e:00:00:00:00:01';
  index.add(first);
  index.add(second);
  assert.equal(index.size, 1);
  assert.equal(index.get(key), second);
  assert.deepEqual([...index], [[key, second]]);
  index.remove(second);
  assert.equal(index.get(key), first);
  index.remove({ ...first }); // not this very entry: nothing happens
  assert.equal(index.get(key), first);
  index.remove(first);
  assert.equal(index.has(key), false);
  // Three sharers: the last added counts; removing the middle one keeps it.
  const third = { ...first, dst: 'c' };
  for (const e of [first, second, third]) index.add(e);
  assert.equal(index.get(key), third);
  index.remove({ ...second }); // a lookalike, not a sharer: nothing happens
  assert.equal(index.get(key), third);
  index.remove(second);
  assert.equal(index.get(key), third);
  index.remove(third);
  assert.equal(index.get(key), first);
  // The first of two sharers goes: the other remains, alone.
  index.add(second);
  index.remove(first);
  assert.equal(index.get(key), second);
  index.remove(second);
  assert.equal(index.size, 0);
});

test('an exclusive kind\'s key wanted in another form is a conflict, naming the form already wanted; other kinds share; a peer\'s own earlier program is no rival', () => {
  const claims: EntryKind<Item> = { ...kind('claims'), exclusive: { code: 'duplicate_x', describe: (e) => `x ${e.id}` } };
  const want = new DesiredState([a, claims]);
  const held = { claims: [{ id: 'k', value: 1 }], a: [{ id: 's', value: 1 }] };
  want.add(held);
  const rival = { claims: [{ id: 'k', value: 2 }] };
  const clash = want.conflict(rival);
  assert.equal(clash?.kind, claims);
  assert.equal(clash?.entry, rival.claims[0]);
  assert.equal(clash?.theirs, held.claims[0]);
  assert.equal(want.conflict({ claims: [{ id: 'k', value: 1 }] }), undefined, 'the same form is shared');
  assert.equal(want.conflict({ a: [{ id: 's', value: 9 }] }), undefined, 'a kind that is not exclusive shares a key in any form');
  assert.equal(want.conflict(rival, held), undefined, 'the same peer, its lease changed');
  assert.ok(want.conflict(rival, { claims: [{ id: 'k', value: 1 }] }), 'an equal entry of another program is still the rival: identity counts, not value');
  assert.equal(want.conflict({}), undefined);
});

test('find: the oldest entry under a key that passes the test, of one entry or of several, and nothing that fails it', () => {
  const index = new EntryIndex<{ k: string; v: number }>((e) => e.k);
  const a = { k: 'x', v: 1 };
  const b = { k: 'x', v: 2 };
  const c = { k: 'x', v: 3 };
  assert.equal(index.find('x', () => true), undefined, 'no entry');
  index.add(a);
  assert.equal(index.find('x', (e) => e.v === 1), a);
  assert.equal(index.find('x', (e) => e.v === 2), undefined, 'one entry that fails the test');
  index.add(b);
  index.add(c);
  assert.equal(index.find('x', (e) => e.v > 1), b, 'the oldest that passes');
  assert.equal(index.find('x', (e) => e.v > 3), undefined);
});
