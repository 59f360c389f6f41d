/** Lines are cut in the bytes, so characters split between chunks survive. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LineTooLongError, Lines } from './lines.js';

test('every cut of multi-byte text into two chunks gives the same lines', () => {
  const text = '{"a":"é😀"}\n\n{"b":"ü"}\ntail €';
  const bytes = Buffer.from(text);
  for (let cut = 0; cut <= bytes.length; cut++) {
    const lines = new Lines();
    const got = [...lines.write(bytes.subarray(0, cut)), ...lines.write(bytes.subarray(cut))];
    assert.deepEqual(got, ['{"a":"é😀"}', '', '{"b":"ü"}'], `cut at ${cut}`);
    assert.equal(lines.rest(), 'tail €');
  }
});

test('a line longer than the bound is an error', () => {
  const lines = new Lines({ maxLineBytes: 8 });
  assert.deepEqual(lines.write(Buffer.from('short\n0123')), ['short']);
  assert.throws(() => lines.write(Buffer.from('45678')), LineTooLongError);
});
