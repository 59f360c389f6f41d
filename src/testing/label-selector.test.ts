/** The labelSelector query parameter parsed and applied as kube-apiserver does. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Labels, labelKeyError, labelValueError, matchesLabels, parseLabelSelector } from './label-selector.js';

const objects: Record<string, Labels> = {
  a: { app: 'web', tier: 'front', replicas: '3' },
  b: { app: 'db', tier: 'back', replicas: '12' },
  c: { app: 'web' },
  d: {},
};

const selected = (selector: string): string[] =>
  Object.entries(objects)
    .filter(([, labels]) => matchesLabels(parseLabelSelector(selector), labels))
    .map(([name]) => name);

test('each operator: =, ==, != (passes objects without the label), in, notin (the same), exists, !, >, <', () => {
  assert.deepEqual(selected('app=web'), ['a', 'c']);
  assert.deepEqual(selected('app==web'), ['a', 'c']);
  assert.deepEqual(selected('app!=web'), ['b', 'd']);
  assert.deepEqual(selected('app in (db,cache)'), ['b']);
  assert.deepEqual(selected('app notin (web)'), ['b', 'd']);
  assert.deepEqual(selected('tier'), ['a', 'b']);
  assert.deepEqual(selected('!tier'), ['c', 'd']);
  assert.deepEqual(selected('replicas>5'), ['b']);
  assert.deepEqual(selected('replicas<5'), ['a']);
});

test('requirements separated by commas must all hold; whitespace between tokens is allowed; empty selects everything', () => {
  assert.deepEqual(selected('app=web,tier'), ['a']);
  assert.deepEqual(selected(' app in ( web ) , !tier '), ['c']);
  assert.deepEqual(selected('app=web,app!=web'), []);
  assert.deepEqual(selected(''), ['a', 'b', 'c', 'd']);
  assert.deepEqual(selected('tier='), [], 'an empty value matches only an empty label');
  assert.deepEqual(parseLabelSelector('example.com/role in (a,b)'), [{ key: 'example.com/role', operator: 'in', values: ['a', 'b'] }]);
});

test('what kube-apiserver refuses to parse is refused', () => {
  for (const bad of ['app in web', 'app in (web', 'a=b c', 'a b', '=b', 'a=b,', ',a', 'a=(b)', '!a=b', 'a>b', 'a in (b c)', 'a/b/c=d', 'a=' + 'x'.repeat(64), '-a=b']) {
    assert.throws(() => parseLabelSelector(bad), Error, bad);
  }
});

test('label keys and values as the API checks them', () => {
  assert.equal(labelKeyError('kubernetes.io/metadata.name'), undefined);
  assert.equal(labelKeyError('app'), undefined);
  assert.ok(labelKeyError('Example.com/app'), 'the prefix is a lowercase DNS subdomain');
  assert.ok(labelKeyError('/app'));
  assert.ok(labelKeyError('app_'));
  assert.ok(labelKeyError('x'.repeat(64)));
  assert.equal(labelValueError(''), undefined);
  assert.equal(labelValueError('A-b_c.1'), undefined);
  assert.ok(labelValueError('a b'));
  assert.ok(labelValueError('-a'));
});
