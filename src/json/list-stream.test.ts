/** The list decoder agrees with JSON.parse however the bytes are cut into chunks. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ListStream, ListStreamError } from './list-stream.js';

function decode(text: string | Buffer, cuts: readonly number[]): { items: unknown[]; members: Record<string, unknown> } {
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  const items: unknown[] = [];
  const stream = new ListStream((item) => items.push(item));
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    stream.write(bytes.subarray(at, cut));
    at = cut;
  }
  const head = stream.end();
  assert.equal(head.items, items.length);
  return { items, members: { ...head.members } };
}

/** Every way of cutting into two pieces, and into pieces of 1 to 7 bytes. */
function chunkings(length: number): number[][] {
  const out: number[][] = [[]];
  for (let i = 1; i < length; i++) out.push([i]);
  for (let size = 1; size <= 7; size++) out.push(Array.from({ length: Math.floor((length - 1) / size) }, (_, k) => (k + 1) * size));
  return out;
}

const tricky = [
  '{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"12","continue":"a\\"b"},"items":[{"a":1},{"b":[1,{"c":"}]"}]}]}',
  '{ "items" : [ { "s" : "\\\\" } , { "t" : "\\\\\\"" } ] , "metadata" : { } , "n" : 12 , "x" : null , "y" : true }',
  '{"items":[],"metadata":{"resourceVersion":"1"}}',
  '{"metadata":{"items":[{"not":"an item"}]},"items":[{"é":"ü\\u00e9 😀"},{"k":"]}\\\\"}],"kind":"List"}',
  '{}',
  '{"items":[{"a":{"items":[1]}},{}]}',
  '{"count":-1.5e3,"items":[{"x":"y"}],"s":""}',
];

test('items and members are exactly what JSON.parse gives, however the text is chunked', () => {
  for (const text of tricky) {
    const whole = JSON.parse(text) as Record<string, unknown>;
    const { items: expectedItems = [], ...expectedMembers } = whole as { items?: unknown[] };
    for (const cuts of chunkings(Buffer.byteLength(text))) {
      const got = decode(text, cuts);
      assert.deepEqual(got.items, expectedItems, `${text} cut at ${cuts.join(',')}`);
      assert.deepEqual(got.members, expectedMembers, `${text} cut at ${cuts.join(',')}`);
    }
  }
});

test('random lists of random strings and nesting agree with JSON.parse in random chunks', () => {
  let seed = 7;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const alphabet = ['a', '"', '\\', '{', '}', '[', ']', ',', ':', ' ', 'é', '😀', '\n'];
  const str = (): string => Array.from({ length: Math.floor(random() * 8) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
  const value = (depth: number): unknown => {
    const r = random();
    if (depth > 3 || r < 0.3) return str();
    if (r < 0.4) return Math.floor(random() * 1000) - 500;
    if (r < 0.45) return null;
    if (r < 0.7) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1));
    return Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [str(), value(depth + 1)]));
  };
  for (let round = 0; round < 300; round++) {
    const list = { kind: str(), metadata: { resourceVersion: str(), [str()]: value(1) }, items: Array.from({ length: Math.floor(random() * 5) }, () => value(0)).map((v) => ({ v })) };
    const text = JSON.stringify(list);
    const bytes = Buffer.from(text);
    const cuts: number[] = [];
    for (let at = 0; at < bytes.length; ) {
      at += 1 + Math.floor(random() * 9);
      if (at < bytes.length) cuts.push(at);
    }
    const got = decode(bytes, cuts);
    assert.deepEqual(got.items, list.items);
    assert.deepEqual(got.members, { kind: list.kind, metadata: list.metadata });
  }
});

test('truncated or malformed lists are errors; an element may not exceed the bound', () => {
  const full = tricky[0]!;
  for (let cut = 0; cut < full.length; cut++) {
    assert.throws(() => decode(full.slice(0, cut), []), (err) => err instanceof ListStreamError || err instanceof SyntaxError, `cut at ${cut}`);
  }
  for (const bad of ['[]', '{"a":1,}', '{"a":1}x', '{"items":[{"a":}]}', '{"a" 1}', '{"items":[{"a":1}] "b":2}']) {
    assert.throws(() => decode(bad, []), (err) => err instanceof ListStreamError || err instanceof SyntaxError, bad);
  }
  const stream = new ListStream(() => undefined, { maxValueBytes: 10 });
  assert.throws(() => stream.write(Buffer.from('{"items":[{"a":"0123456789abcdef"')), ListStreamError);
});

test('each top-level member but the items is heard as soon as it is parsed, before the items that follow', () => {
  const heard: string[] = [];
  const list = new ListStream((item) => heard.push(`item ${(item as { n: number }).n}`), { onMember: (name, value) => heard.push(`${name} ${JSON.stringify(value)}`) });
  const text = '{"kind":"NodeList","metadata":{"continue":"abc"},"count":3,"items":[{"n":1},{"n":2}],"after":null}';
  for (let i = 0; i < text.length; i += 7) list.write(Buffer.from(text.slice(i, i + 7)));
  assert.deepEqual(heard, ['kind "NodeList"', 'metadata {"continue":"abc"}', 'count 3', 'item 1', 'item 2', 'after null']);
  assert.deepEqual(list.end().members, { kind: 'NodeList', metadata: { continue: 'abc' }, count: 3, after: null });
});

test('items that end where the next begins as the first did are taken whole, and agree with JSON.parse wherever that guess is wrong', () => {
  const node = (i: number): unknown => ({ metadata: { name: `n${i}`, labels: { 'a/b': 'é😀' } }, spec: { podCIDR: '198.18.0.0/24' }, status: { conditions: [{ type: 'Ready' }, { type: 'x' }] } });
  const items: unknown[] = Array.from({ length: 200 }, (_, i) => node(i));
  // Where the boundary's text is not a boundary: inside an item (its own objects led by the same
  // key), inside strings (escaped), and before an item that starts with another key.
  items[3] = { metadata: { name: 'nested' }, more: [{ metadata: 1 }, { metadata: 2 }] };
  items[5] = { metadata: { name: '},{"metadata":' }, note: '\\},{\"metadata\":' };
  items[7] = { spec: { first: 'another key first' }, metadata: { name: 'n7' } };
  items[8] = { metadata: { name: 'after the odd one' } };
  const list = { kind: 'NodeList', metadata: { resourceVersion: '9' }, items };
  const bytes = Buffer.from(JSON.stringify(list));
  for (const size of [bytes.length, 4096, 700, 97]) {
    const seen: unknown[] = [];
    const stream = new ListStream((item) => seen.push(item));
    for (let at = 0; at < bytes.length; at += size) stream.write(bytes.subarray(at, at + size));
    const head = stream.end();
    assert.deepEqual(seen, items, `chunks of ${size}`);
    assert.deepEqual(head.members, { kind: 'NodeList', metadata: { resourceVersion: '9' } });
    if (size === bytes.length) {
      // The first (it gives the boundary), the one with nested objects, the one led by another
      // key (its guess spans two items) and the one after it (it starts before that guess's
      // boundary), and the last (no boundary after it).
      assert.equal(head.scanned, 5, 'in one chunk');
    } else {
      // Besides those, only the items a chunk's end cuts, or the boundary after them: two a chunk.
      assert.ok(head.scanned <= 5 + 2 * Math.ceil(bytes.length / size), `chunks of ${size}: ${head.scanned} scanned`);
      if (size === 4096) assert.ok(head.scanned < items.length / 4, `chunks of ${size}: ${head.scanned} scanned`);
    }
  }
  // A list whose items share no first key is scanned whole, and right.
  const mixed = { items: [{ a: 1 }, { b: 2 }, { a: 3 }] };
  const seen: unknown[] = [];
  const stream = new ListStream((item) => seen.push(item));
  stream.write(Buffer.from(JSON.stringify(mixed)));
  assert.equal(stream.end().scanned, 2);
  assert.deepEqual(seen, mixed.items);
});

test('a malformed item is an error whether or not it was taken whole', () => {
  const good = '{"metadata":{"name":"a"}}';
  for (const bad of ['{"metadata":{"name":"b",}}', '{"metadata":{"name":"b"}']) {
    const text = `{"items":[${good},${bad},${good}]}`;
    assert.throws(() => decode(text, []), (err) => err instanceof ListStreamError || err instanceof SyntaxError, bad);
  }
});

test('a failed guess is not made again for the items before its boundary: a list of tiny items and one boundary a chunk stays linear', () => {
  // One proper item gives the boundary; then runs of empty items, each run ended by an item that
  // holds the boundary's text inside it, so that every guess from the run would reach it and fail.
  const parts = ['{"metadata":{"name":"first"}}'];
  for (let run = 0; run < 20; run++) {
    for (let k = 0; k < 500; k++) parts.push('{}');
    parts.push('{"metadata":{"x":[{"a":1},{"metadata":2}]}}');
  }
  const bytes = Buffer.from(`{"items":[${parts.join(',')}]}`);
  let parses = 0;
  const parse = JSON.parse;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    parses++;
    return parse(text, reviver);
  }) as typeof JSON.parse;
  let items = 0;
  try {
    const stream = new ListStream(() => items++);
    stream.write(bytes);
    assert.equal(stream.end().items, parts.length);
  } finally {
    JSON.parse = parse;
  }
  assert.equal(items, parts.length);
  // One parse an item, and one failed guess a run (not one for each of its 500 items).
  assert.ok(parses <= parts.length + 2 * 20 + 2, `${parses} parses for ${parts.length} items`);
  // A chunk with no boundary in it at all: searched once, nothing guessed.
  const none = Buffer.from(`{"items":[{"metadata":{"name":"first"}},${'{},'.repeat(5000)}{}]}`);
  parses = 0;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    parses++;
    return parse(text, reviver);
  }) as typeof JSON.parse;
  try {
    const stream = new ListStream(() => undefined);
    stream.write(none);
    assert.equal(stream.end().scanned, 5002);
  } finally {
    JSON.parse = parse;
  }
  assert.equal(parses, 5002 + 1); // the items, and the key "items"
});
