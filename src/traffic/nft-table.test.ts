/** An owned table as nft text: sets, chains, base-chain hooks, comments; and its shape. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type OwnedTable, deleteTables, replaceTables, shapeText, tableShape } from './nft-table.js';

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
  assert.equal(tableShape(table), 'weft-policy:forward=1,pod-1=0 sets:peers4=2,ports=1,none=0');
  assert.equal(tableShape({ family: 'ip', name: 'flannel-ipv4', chains: [] }), 'flannel-ipv4:');
  assert.equal(shapeText('t', [['c', 2]], []), 't:c=2');
});
