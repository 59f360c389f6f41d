/** The byte-wise integers against Buffer's own readers and writers, at the edges of each range. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getI32, getU16, getU32, getU32Be, setU16, setU32, setU32Be } from './bytes.js';

test('stores and reads match Buffer\'s little- and big-endian methods, at every edge', () => {
  for (const v of [0, 1, 0x7f, 0x80, 0xff, 0x100, 0x1234, 0x7fff, 0x8000, 0xfffe, 0xffff]) {
    const mine = Buffer.alloc(6);
    setU16(mine, 1, v);
    const theirs = Buffer.alloc(6);
    theirs.writeUInt16LE(v, 1);
    assert.deepEqual(mine, theirs, `u16 ${v}`);
    assert.equal(getU16(theirs, 1), v);
  }
  for (const v of [0, 1, 0xff, 0x100, 0x12345678, 0x7fffffff, 0x80000000, 0xc6120010, 0xfffffffe, 0xffffffff]) {
    const mine = Buffer.alloc(8);
    const theirs = Buffer.alloc(8);
    setU32(mine, 2, v);
    theirs.writeUInt32LE(v, 2);
    assert.deepEqual(mine, theirs, `u32 ${v}`);
    assert.equal(getU32(theirs, 2), v);
    assert.equal(getI32(theirs, 2), theirs.readInt32LE(2));
    setU32Be(mine, 3, v);
    theirs.writeUInt32BE(v, 3);
    assert.deepEqual(mine, theirs, `u32 big-endian ${v}`);
    assert.equal(getU32Be(theirs, 3), v);
  }
});

test('a store touches its own bytes only', () => {
  const b = Buffer.alloc(8, 0xaa);
  setU32(b, 2, 0);
  setU16(b, 0, 0x0102);
  assert.deepEqual([...b], [0x02, 0x01, 0, 0, 0, 0, 0xaa, 0xaa]);
  setU32Be(b, 4, 0x01020304);
  assert.deepEqual([...b.subarray(4)], [1, 2, 3, 4]);
});
