/** The compact form a program takes while its peer lives: lone entries as themselves, lists as lists. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { entriesOfKind, forEachOfKind, keep, wantsEntry } from './kept-program.js';

const a = { n: 1 };
const b = { n: 2 };
const c = { n: 3 };

test('keep: a one-entry list becomes its entry, longer lists stay, absent and empty kinds are left out', () => {
  const kept = keep({ route: [a], fdb: [b, c], neighbour: undefined, tunnel: [] });
  assert.equal(kept['route'], a);
  assert.deepEqual(kept['fdb'], [b, c]);
  assert.deepEqual(Object.keys(kept), ['route', 'fdb', 'tunnel']);
  assert.deepEqual(kept['tunnel'], []);
});

test('entriesOfKind and forEachOfKind read both forms, and nothing for a kind the program lacks', () => {
  const kept = keep({ route: [a], fdb: [b, c] });
  assert.deepEqual(entriesOfKind(kept, 'route'), [a]);
  assert.deepEqual(entriesOfKind(kept, 'fdb'), [b, c]);
  assert.deepEqual(entriesOfKind(kept, 'neighbour'), []);
  const seen: object[] = [];
  for (const kind of ['route', 'fdb', 'neighbour']) forEachOfKind(kept, kind, (e) => seen.push(e));
  assert.deepEqual(seen, [a, b, c]);
  assert.equal(seen[0], a, 'the very entries, not copies');
});

test('wantsEntry compares by identity, in both forms', () => {
  const kept = keep({ route: [a], fdb: [b, c] });
  assert.equal(wantsEntry(kept, 'route', a), true);
  assert.equal(wantsEntry(kept, 'route', { n: 1 }), false, 'an equal entry is another entry');
  assert.equal(wantsEntry(kept, 'fdb', c), true);
  assert.equal(wantsEntry(kept, 'fdb', a), false);
  assert.equal(wantsEntry(kept, 'neighbour', a), false);
});
