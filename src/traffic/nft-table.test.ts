/** An owned table as nft text: sets, chains, base-chain hooks, comments; and its shape. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type NftChain, type OwnedTable, deleteTables, replaceTables, shapeText, tableShape, updateTable } from './nft-table.js';

const table: OwnedTable = {
  family: 'inet',
  name: 'weft-policy',
  comment: 'a "quoted" \\ comment',
  sets: [
    { name: 'peers4', type: 'ipv4_addr', flags: ['interval'], elements: ['198.18.1.0/24', '198.18.2.5'] },
    { name: 'ports', type: 'inet_service', flags: [], elements: ['80'] },
    { name: 'none', type: 'ipv6_addr', elements: [] },
  ],
  chains: [
    { name: 'forward', comment: 'the hook', base: { type: 'filter', hook: 'forward', priority: 'filter - 1', policy: 'drop' }, rules: ['ip saddr @peers4 accept'] },
    { name: 'pod-1', rules: [] },
  ],
};

test('a table is replaced whole in one transaction, its sets and chains written as nft reads them', () => {
  assert.equal(
    replaceTables([table]),
    [
      'add table inet weft-policy',
      'delete table inet weft-policy',
      'table inet weft-policy {',
      '  comment "a quoted  comment"',
      '  set peers4 {',
      '    type ipv4_addr',
      '    flags interval',
      '    elements = { 198.18.1.0/24, 198.18.2.5 }',
      '  }',
      '  set ports {',
      '    type inet_service',
      '    elements = { 80 }',
      '  }',
      '  set none {',
      '    type ipv6_addr',
      '  }',
      '  chain forward {',
      '    comment "the hook"',
      '    type filter hook forward priority filter - 1; policy drop;',
      '    ip saddr @peers4 accept',
      '  }',
      '  chain pod-1 {',
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  assert.equal(replaceTables([{ family: 'ip', name: 't', chains: [] }]), 'add table ip t\ndelete table ip t\ntable ip t {\n}\n', 'no comment, no sets');
  assert.ok(replaceTables([{ family: 'ip', name: 't', sets: [{ name: 's', type: 'ipv4_addr', flags: ['interval', 'timeout'], elements: [] }], chains: [] }]).includes('    flags interval, timeout\n'));
  const two = replaceTables([{ family: 'ip', name: 'a', chains: [] }, { family: 'ip6', name: 'b', chains: [] }]);
  assert.ok(two.indexOf('table ip6 b {') > two.indexOf('table ip a {'), 'several tables in one transaction, in order');
});

test('deleting tables deletes them where they exist and nothing else; a shape counts rules and elements', () => {
  assert.equal(deleteTables([table, { family: 'ip', name: 'x' }]), 'add table inet weft-policy\ndelete table inet weft-policy\nadd table ip x\ndelete table ip x\n');
  assert.equal(tableShape(table), 'weft-policy:forward=1,pod-1=0 sets:none=0,peers4=2,ports=1');
  assert.equal(tableShape({ family: 'ip', name: 'flannel-ipv4', chains: [] }), 'flannel-ipv4:');
  assert.equal(shapeText('t', [['c', 2]], []), 't:c=2');
});

const pod = (n: number, rules: string[]): NftChain => ({ name: `in-${n}`, comment: `pod ${n}`, rules });
const base: OwnedTable = {
  family: 'inet',
  name: 'weft-policy',
  sets: [
    { name: 'in-1-0', type: 'ipv4_addr', flags: ['interval'], elements: ['198.18.1.0/24'] },
    { name: 'in-2-0', type: 'ipv4_addr', flags: ['interval'], elements: ['198.18.2.0/24'] },
    { name: 'in4', map: true, type: 'ipv4_addr : verdict', elements: ['198.18.10.1 : jump in-1', '198.18.10.2 : jump in-2'] },
    { name: 'dry-in4', type: 'ipv4_addr . ipv4_addr', elements: [], dynamic: { timeoutS: 3600, size: 65536 } },
  ],
  chains: [
    { name: 'forward', base: { type: 'filter', hook: 'forward', priority: 'filter', policy: 'accept' }, rules: ['ip daddr vmap @in4'] },
    pod(1, ['ip saddr @in-1-0 return', 'counter reject']),
    pod(2, ['ip saddr @in-2-0 return', 'counter reject']),
  ],
};

test('a table changed in place: only what differs, in an order nft accepts; unchanged is nothing to write', () => {
  assert.deepEqual(updateTable(base, base), { text: '', touched: { written: [], gone: [] } });
  const next: OwnedTable = {
    ...base,
    sets: [
      { name: 'in-1-0', type: 'ipv4_addr', flags: ['interval'], elements: ['198.18.1.0/24', '198.18.3.4'] },
      { name: 'in-3-0', type: 'ipv4_addr', flags: ['interval'], elements: ['198.18.3.0/24'] },
      { name: 'in4', map: true, type: 'ipv4_addr : verdict', elements: ['198.18.10.1 : jump in-1', '198.18.10.3 : jump in-3'] },
      base.sets![3]!,
    ],
    chains: [base.chains[0]!, base.chains[1]!, pod(3, ['ip saddr @in-3-0 return', 'counter reject'])],
  };
  const update = updateTable(base, next)!;
  assert.equal(
    update.text,
    [
      'add chain inet weft-policy in-3 { comment "pod 3"; }',
      'add set inet weft-policy in-3-0 { type ipv4_addr; flags interval; }',
      'flush set inet weft-policy in-1-0',
      'add element inet weft-policy in-1-0 { 198.18.1.0/24, 198.18.3.4 }',
      'add element inet weft-policy in-3-0 { 198.18.3.0/24 }',
      'add rule inet weft-policy in-3 ip saddr @in-3-0 return',
      'add rule inet weft-policy in-3 counter reject',
      'delete element inet weft-policy in4 { 198.18.10.2 }',
      'add element inet weft-policy in4 { 198.18.10.3 : jump in-3 }',
      'delete chain inet weft-policy in-2',
      'delete set inet weft-policy in-2-0',
      '',
    ].join('\n'),
    'pod 1 keeps its chain (and its counters); pod 2 goes after nothing jumps to it; the dynamic set is left alone',
  );
  assert.deepEqual(update.touched, {
    written: [{ kind: 'chain', name: 'in-3' }, { kind: 'set', name: 'in-3-0' }, { kind: 'set', name: 'in-1-0' }, { kind: 'map', name: 'in4' }],
    gone: ['chain in-2', 'set in-2-0'],
  }, 'what to list again afterwards, and what is gone');
  const rewritten = updateTable(base, { ...base, chains: [base.chains[0]!, pod(1, ['counter reject']), base.chains[2]!] });
  assert.equal(rewritten?.text, 'flush chain inet weft-policy in-1\nadd rule inet weft-policy in-1 counter reject\n');
  const moved = updateTable(base, { ...base, sets: base.sets!.map((s) => (s.name === 'in4' ? { ...s, elements: ['198.18.10.1 : jump in-2', '198.18.10.2 : jump in-2'] } : s)) });
  assert.equal(moved?.text, 'delete element inet weft-policy in4 { 198.18.10.1 }\nadd element inet weft-policy in4 { 198.18.10.1 : jump in-2 }\n', 'a key given another verdict');
});

test('what only a replacement can do: another table, a base chain changed, added or gone, a set declared otherwise, a chain\'s comment', () => {
  const chains = base.chains;
  for (const [what, next] of [
    ['another table', { ...base, name: 'other' }],
    ['a base chain\'s hook', { ...base, chains: [{ ...chains[0]!, base: { ...chains[0]!.base!, priority: 'filter - 1' } }, ...chains.slice(1)] }],
    ['a base chain added', { ...base, chains: [...chains, { ...chains[0]!, name: 'input' }] }],
    ['a base chain gone', { ...base, chains: chains.slice(1) }],
    ['a set\'s flags', { ...base, sets: base.sets!.map((s) => (s.name === 'in-1-0' ? { ...s, flags: [] } : s)) }],
    ['a dynamic set\'s size', { ...base, sets: base.sets!.map((s) => (s.dynamic ? { ...s, dynamic: { timeoutS: 3600, size: 10 } } : s)) }],
    ['a chain\'s comment', { ...base, chains: [chains[0]!, { ...chains[1]!, comment: 'renamed' }, chains[2]!] }],
  ] as const) assert.equal(updateTable(base, next as OwnedTable), undefined, what);
});

test('a dynamic set is declared with its timeout and size, and filled by rules only; a table comment changed is a replacement; a new empty set gets no elements line', () => {
  const t: OwnedTable = { family: 'inet', name: 'p', sets: [{ name: 'dry-in4', type: 'ipv4_addr . ipv4_addr', elements: [], dynamic: { timeoutS: 3600, size: 65536 } }], chains: [] };
  const text = replaceTables([t]);
  assert.ok(text.includes('  set dry-in4 {\n    type ipv4_addr . ipv4_addr\n    flags dynamic, timeout\n    timeout 3600s\n    size 65536\n  }\n'), text);
  assert.equal(updateTable(base, { ...base, comment: 'another' }), undefined);
  const added = updateTable(base, { ...base, sets: [...base.sets!, { name: 'empty', type: 'ipv4_addr', flags: ['interval'], elements: [] }] })!;
  assert.equal(added.text, 'add set inet weft-policy empty { type ipv4_addr; flags interval; }\n');
  const dyn = updateTable(base, { ...base, sets: [...base.sets!, { name: 'dry-out4', type: 'ipv4_addr . ipv4_addr', elements: [], dynamic: { timeoutS: 3600, size: 65536 } }] })!;
  assert.equal(dyn.text, 'add set inet weft-policy dry-out4 { type ipv4_addr . ipv4_addr; flags dynamic, timeout; timeout 3600s; size 65536; }\n');
  const gone = updateTable(base, { ...base, sets: base.sets!.filter((s) => s.name !== 'in4'), chains: [{ ...base.chains[0]!, rules: base.chains[0]!.rules }, ...base.chains.slice(1)] })!;
  assert.ok(gone.text.includes('delete map inet weft-policy in4\n') && gone.touched.gone.includes('map in4'));
});

test('named counters: declared with the table, added before the chains that use them and deleted after', () => {
  const withCounters = (names: string[]): OwnedTable => ({ ...base, counters: names });
  assert.ok(replaceTables([withCounters(['c-in-1'])]).includes('  counter c-in-1 {\n  }\n'));
  assert.equal(updateTable(withCounters(['c-in-1']), withCounters(['c-in-1']))!.text, '');
  const change = updateTable(withCounters(['c-in-1', 'c-in-2']), { ...withCounters(['c-in-1', 'c-in-3']), chains: [base.chains[0]!, base.chains[1]!, pod(3, ['counter name "c-in-3" reject'])] })!;
  const lines = change.text.split('\n');
  assert.equal(lines[0], 'add counter inet weft-policy c-in-3');
  assert.ok(lines.indexOf('delete counter inet weft-policy c-in-2') > lines.indexOf('delete chain inet weft-policy in-2'), 'deleted once no chain uses it');
});
