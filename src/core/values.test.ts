import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collectGarbage } from '../testing/gc.js';
import { Values } from './values.js';

/** A source that yields `first`'s result, then waits for `more` before yielding its values. */
async function* source(first: () => object, more: Promise<object[]>, closed: { value: boolean }): AsyncGenerator<object> {
  try {
    yield first();
    for (const v of await more) yield v;
  } finally {
    closed.value = true;
  }
}

/** Creates the value inside a call, so that no frame of the test holds it. */
function made(into: { ref?: WeakRef<object> }): () => object {
  return () => {
    const v = { peers: Array.from({ length: 100 }, (_, i) => ({ i })) };
    into.ref = new WeakRef(v);
    return v;
  };
}

test('each: a value handled is not held while the next is awaited; values come in order and the end returns', async () => {
  const first: { ref?: WeakRef<object> } = {};
  let release!: (v: object[]) => void;
  const closed = { value: false };
  const values = new Values(source(made(first), new Promise((r) => (release = r)), closed));
  const seen: object[] = [];
  let handledFirst!: () => void;
  const firstHandled = new Promise<void>((r) => (handledFirst = r));
  const done = values.each((v) => {
    seen.push(Object.keys(v));
    handledFirst();
  });
  await firstHandled;
  await new Promise((r) => setImmediate(r));
  collectGarbage();
  assert.equal(first.ref?.deref(), undefined, 'the first value is let go once handled');
  release([{ b: 1 }, { c: 2 }]);
  await done;
  assert.deepEqual(seen, [['peers'], ['b'], ['c']]);
  assert.equal(closed.value, true);
});

test('next: the source\'s values one at a time, undefined at its end; close ends a source left early', async () => {
  const closed = { value: false };
  const values = new Values(source(() => ({ a: 1 }), Promise.resolve([{ b: 2 }]), closed));
  assert.deepEqual(await values.next(), { a: 1 });
  await values.close();
  assert.equal(closed.value, true, 'the generator\'s finally ran');
  assert.equal(await values.next(), undefined);
  const whole = new Values(source(() => ({ a: 1 }), Promise.resolve([{ b: 2 }]), { value: false }));
  assert.deepEqual([await whole.next(), await whole.next(), await whole.next()], [{ a: 1 }, { b: 2 }, undefined]);
});

test('each: a handler that throws rejects each, and the values after it are not taken', async () => {
  const closed = { value: false };
  const values = new Values(source(() => ({ a: 1 }), Promise.resolve([{ b: 2 }]), closed));
  const seen: object[] = [];
  await assert.rejects(
    values.each((v) => {
      seen.push(v);
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.deepEqual(seen, [{ a: 1 }]);
  await values.close();
  assert.equal(closed.value, true);
});

test('close: a source whose iterator has no return() is left as it is', async () => {
  let taken = 0;
  const bare: AsyncIterable<object> = { [Symbol.asyncIterator]: () => ({ next: async () => ({ done: false, value: { n: ++taken } }) }) };
  const values = new Values(bare);
  assert.deepEqual(await values.next(), { n: 1 });
  await values.close();
  assert.deepEqual(await values.next(), { n: 2 });
});

test('ask: the source moves on at once (a generator lets go of what it yielded), and next() takes that value; a failure reaches next(), not the process', async () => {
  let resumed = 0;
  const gen = (async function* (): AsyncGenerator<object> {
    yield { n: 1 };
    resumed++;
    yield { n: 2 };
    resumed++;
    throw new Error('gone');
  })();
  const values = new Values(gen);
  assert.deepEqual(await values.next(), { n: 1 });
  values.ask();
  values.ask();
  assert.equal(resumed, 1, 'resumed by the first ask, not again by the second');
  assert.deepEqual(await values.next(), { n: 2 });
  values.ask();
  await new Promise((r) => setImmediate(r));
  await assert.rejects(values.next(), /gone/);
});
