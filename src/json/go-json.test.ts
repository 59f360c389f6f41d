import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compactJson, member, parseJsonObject, rawMembers } from './go-json.js';
import { isWeftError } from '../core/errors.js';

test('compactJson removes whitespace outside strings only', () => {
  assert.equal(compactJson(' { "a" : [ 1 , 2 ],\n "b c":"x y\\" z" } '), '{"a":[1,2],"b c":"x y\\" z"}');
  assert.throws(() => compactJson('{'), SyntaxError);
  // Compact text comes back as it is, whitespace inside its strings too.
  assert.equal(compactJson('{"a":[1,2],"b":"x y"}'), '{"a":[1,2],"b":"x y"}');
  assert.equal(compactJson('{"b":"x\\ty"}\n'), '{"b":"x\\ty"}');
  assert.throws(() => compactJson('{"a":1} x'), SyntaxError);
  assert.equal(compactJson('{\t"a" :\r\n[1,\t2]}'), '{"a":[1,2]}');
});

test('rawMembers keeps every value as written', () => {
  assert.deepEqual(rawMembers('{"A":1.50,"B":{"c":[1,{"d":"}"}]},"E":"x","F":null,"G":true}'), [
    ['A', '1.50'], ['B', '{"c":[1,{"d":"}"}]}'], ['E', '"x"'], ['F', 'null'], ['G', 'true'],
  ]);
  assert.deepEqual(rawMembers('{}'), []);
  assert.throws(() => rawMembers('[1]'), SyntaxError);
  assert.throws(() => rawMembers('"s"'), SyntaxError);
});

test('member matches case-insensitively and the last match wins', () => {
  const obj = parseJsonObject('{"Network":"a","network":"b","Other":1}', 'cfg');
  assert.equal(member(obj, 'NETWORK'), 'b');
  assert.equal(member(obj, 'missing'), undefined);
  assert.throws(() => parseJsonObject('[]', 'the thing'), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message.startsWith('the thing'));
});
