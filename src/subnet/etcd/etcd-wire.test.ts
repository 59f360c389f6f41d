/** The pure parts of the etcd client: protobuf wire format, etcd's messages, gRPC framing, endpoint forms. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isWeftError } from '../../core/errors.js';
import { ProtoReader, ProtoWriter } from './proto-wire.js';
import { decodeKeyValue, decodeLeaseGrant, decodeRange, decodeRevision, decodeTimeToLive, decodeToken, decodeTxn, decodeWatchResponse, encodeAuthenticate, encodeCompact, encodeLeaseGrant, encodeLeaseId, encodeRange, encodePut, encodeTxn, encodeWatchCreate, watchProgressRequest } from './etcd-messages.js';
import { FrameDecoder, frameMessage, grpcOutcome, grpcTimeout } from './grpc-frame.js';
import { endpointAuthority, parseEtcdEndpoint } from './etcd-endpoint.js';

const hex = (b: Buffer): string => b.toString('hex');

test('varints: small, multi-byte, 64-bit IDs and negative int64 as ten bytes, each read back', () => {
  const buf = new ProtoWriter().int(1, 1).int(2, 300).int(3, '9223372036854775807').int(4, -1).int(5, 2 ** 53 - 1).finish();
  assert.equal(hex(buf.subarray(0, 5)), '0801' + '10ac02');
  const r = new ProtoReader(buf);
  const got: Array<[number, string]> = [];
  while (r.next()) got.push([r.field, r.field === 3 ? r.id() : String(r.int())]);
  assert.deepEqual(got, [[1, '1'], [2, '300'], [3, '9223372036854775807'], [4, '-1'], [5, String(2 ** 53 - 1)]]);
  // Group boundaries, on both the number and the bigint path.
  assert.equal(hex(new ProtoWriter().int(1, 127).int(1, 128).finish()), '087f' + '088001');
  assert.equal(hex(new ProtoWriter().int(1, 2n ** 63n - 1n).finish()), '08ffffffffffffffff7f');
  assert.equal(hex(new ProtoWriter().int(1, -1).finish()), '08ffffffffffffffffff01');
  // Past 2^53 a number would be wrong: refused; as an ID it is exact.
  const big = new ProtoReader(new ProtoWriter().int(1, 2n ** 60n).finish());
  big.next();
  assert.throws(() => big.int(), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL') && /beyond 2\^53/.test(err.message));
  const exact = new ProtoReader(new ProtoWriter().int(1, 2n ** 60n).finish());
  exact.next();
  assert.equal(exact.id(), String(2n ** 60n));
  // A field read as what it is not is a protocol error, not a wrong value.
  for (const read of [(r: ProtoReader) => r.int(), (r: ProtoReader) => r.id(), (r: ProtoReader) => r.bool()]) {
    const r = new ProtoReader(Buffer.from('0a0161', 'hex'));
    r.next();
    assert.throws(() => read(r), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL') && /wire type 2, expected 0/.test(err.message));
  }
  const falsy = new ProtoReader(Buffer.from('1000', 'hex'));
  falsy.next();
  assert.equal(falsy.bool(), false, 'a bool written as 0');
});

test('zero and empty fields are left out, unless a oneof needs them', () => {
  assert.equal(new ProtoWriter().int(1, 0).bool(2, false).bytes(3, '').finish().length, 0);
  assert.equal(hex(new ProtoWriter().int(4, 0, true).bytes(1, '', true).finish()), '2000' + '0a00');
});

test('the reader skips fields it is not asked for, of every wire type, and refuses what runs past the end', () => {
  // field 1 varint, field 2 fixed64, field 3 bytes, field 4 fixed32, then field 5 = 7.
  const buf = Buffer.from('08ff01' + '11' + '0102030405060708' + '1a03616263' + '25' + '01020304' + '2807', 'hex');
  const r = new ProtoReader(buf);
  let five: number | undefined;
  while (r.next()) if (r.field === 5) five = r.int();
  assert.equal(five, 7);
  const cut = new ProtoReader(Buffer.from('1a05616263', 'hex'));
  assert.equal(cut.next(), true);
  assert.throws(() => cut.bytes(), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL'));
  assert.throws(() => {
    const r2 = new ProtoReader(Buffer.from('0a01', 'hex'));
    while (r2.next());
  }, (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL'));
  const wrong = new ProtoReader(Buffer.from('0801', 'hex'));
  wrong.next();
  assert.throws(() => wrong.bytes(), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL') && /wire type 0/.test(err.message));
  assert.throws(() => new ProtoReader(Buffer.from('0001', 'hex')).next(), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL'));
  // Cut inside a varint: a tag without its length, a skipped number, a read one, a tag of eight bytes.
  for (const [bytes, read] of [['0a', false], ['08', false], ['08ff', true], ['0aff', false], ['0affffffffffffffff01', false]] as const) {
    assert.throws(() => {
      const r4 = new ProtoReader(Buffer.from(bytes, 'hex'));
      while (r4.next()) if (read) r4.int();
    }, (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL'), bytes);
  }
  assert.throws(() => {
    const r3 = new ProtoReader(Buffer.from('08ffffffffffffffffffff01', 'hex'));
    r3.next();
    r3.int();
  }, (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL'));
});

test('requests encode as etcd reads them (field numbers of rpc.proto)', () => {
  assert.equal(hex(encodeRange({ key: 'a', rangeEnd: 'b', limit: 500, revision: 7 })), '0a0161' + '120162' + '18f403' + '2007');
  assert.equal(hex(encodeRange({ key: '' })), '', 'an empty key is an absent one in proto3');
  assert.equal(hex(encodeLeaseGrant(86400)), '0880a305');
  assert.equal(hex(encodeAuthenticate('flannel', 'pw')), '0a07' + Buffer.from('flannel').toString('hex') + '12027077');
  assert.equal(hex(encodePut({ key: 'k', value: 'v', lease: '5' })), '0a016b' + '120176' + '1805');
  assert.equal(hex(encodeCompact(9)), '0809' + '1001');
  assert.equal(hex(encodeLeaseId('1')), '0801');
  // Compare{key "k", version 0} (target VERSION and result EQUAL are 0), success put k=v.
  assert.equal(hex(encodeTxn([{ key: 'k', target: 'VERSION', version: 0 }], [{ put: { key: 'k', value: 'v' } }])), '0a05' + '1a016b2000' + '1208' + '1206' + '0a016b120176');
  // Compare{target MOD (2), key, mod_revision 3}, success delete k.
  assert.equal(hex(encodeTxn([{ key: 'k', target: 'MOD', modRevision: 3 }], [{ deleteRange: { key: 'k' } }])), '0a07' + '1002' + '1a016b' + '3003' + '1205' + '1a03' + '0a016b');
  // WatchRequest{create_request{key, range_end, start_revision 2, progress_notify}}.
  assert.equal(hex(encodeWatchCreate({ key: 'a', rangeEnd: 'b', startRevision: 2 })), '0a0a' + '0a0161' + '120162' + '1802' + '2001');
  assert.equal(hex(watchProgressRequest), '1a00', 'WatchRequest{progress_request: {}}');
});

const header = (revision: number): Buffer => new ProtoWriter().int(1, 11).int(2, 12).int(3, revision).int(4, 5).finish();
const kv = (key: string, value: string, mod: number): Buffer => new ProtoWriter().bytes(1, key).int(2, 2).int(3, mod).int(4, 1).bytes(5, value).int(6, '7587880000000000001').finish();

test('answers decode from etcd\'s fields, past fields weft does not know', () => {
  const range = new ProtoWriter().bytes(1, header(42)).bytes(2, kv('/a', '1', 3)).bytes(2, kv('/b', '2', 4)).bool(3, true).int(4, 2).bytes(99, 'future').finish();
  const r = decodeRange(range);
  assert.equal(r.revision, 42);
  assert.equal(r.more, true);
  assert.deepEqual(r.kvs[1], { key: '/b', value: '2', modRevision: 4, createRevision: 2, version: 1, lease: '7587880000000000001' });
  assert.deepEqual(decodeKeyValue(new ProtoWriter().bytes(1, '/c').finish()), { key: '/c', value: '', modRevision: 0, createRevision: 0, version: 0, lease: '0' });
  assert.equal(decodeRange(new ProtoWriter().bytes(1, header(42)).finish()).more, false);
  // TxnResponse.responses (3) is a message, passed over.
  const responses = new ProtoWriter().bytes(1, new ProtoWriter().bytes(1, header(8)).finish()).finish();
  assert.deepEqual(decodeTxn(new ProtoWriter().bytes(1, header(8)).bool(2, true).bytes(3, responses).finish()), { revision: 8, succeeded: true });
  assert.deepEqual(decodeTxn(new ProtoWriter().bytes(1, header(8)).bytes(3, responses).finish()), { revision: 8, succeeded: false });
  // The header wherever it comes (DeleteRangeResponse.deleted first).
  assert.equal(decodeRevision(new ProtoWriter().int(2, 5).bytes(1, header(13)).finish()), 13);
  assert.deepEqual(decodeLeaseGrant(new ProtoWriter().bytes(1, header(1)).int(2, '7587880000000000001').int(3, 60).bytes(4, 'no space').int(9, 1).finish()), { id: '7587880000000000001', ttl: 60, error: 'no space' });
  assert.deepEqual(decodeLeaseGrant(new ProtoWriter().bytes(1, header(1)).finish()), { id: '0', ttl: 0, error: '' });
  assert.equal(decodeTimeToLive(new ProtoWriter().bytes(1, header(1)).int(2, 5).int(3, -1).int(4, 60).finish()), -1);
  assert.equal(decodeToken(new ProtoWriter().bytes(1, header(1)).bytes(2, 'tok.en').finish()), 'tok.en');
  assert.equal(decodeToken(new ProtoWriter().bytes(1, header(1)).finish()), '');
  // Event: type 1, kv 2, prev_kv 3 (not asked for, passed over).
  const event = (type: number, k: Buffer): Buffer => new ProtoWriter().int(1, type).bytes(2, k).bytes(3, kv('/prev', 'old', 1)).finish();
  const watch = decodeWatchResponse(new ProtoWriter().bytes(1, header(50)).int(2, 1).bool(3, true).bytes(11, event(0, kv('/a', 'x', 49))).bytes(11, event(1, kv('/b', '', 50))).finish());
  assert.deepEqual({ ...watch, events: watch.events.map((e) => `${e.type} ${e.kv.key} ${e.kv.value}`) }, { revision: 50, canceled: false, compactRevision: 0, cancelReason: '', events: ['PUT /a x', 'DELETE /b '] });
  const cancelled = decodeWatchResponse(new ProtoWriter().bytes(1, header(60)).bool(4, true).int(5, 30).bytes(6, 'compacted').finish());
  assert.deepEqual([cancelled.canceled, cancelled.compactRevision, cancelled.cancelReason], [true, 30, 'compacted']);
  assert.throws(() => decodeWatchResponse(new ProtoWriter().bytes(11, new ProtoWriter().int(1, 1).finish()).finish()), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL'), 'an event without its key-value');
});

test('gRPC frames: split anywhere, several in one chunk; compressed, oversized and cut-short ones refused', () => {
  const a = frameMessage(Buffer.from('hello'));
  const b = frameMessage(Buffer.alloc(0));
  const both = Buffer.concat([a, b, frameMessage(Buffer.from('!'))]);
  for (let cut = 0; cut <= both.length; cut++) {
    const d = new FrameDecoder(100);
    const got = [...d.push(both.subarray(0, cut)), ...d.push(both.subarray(cut))].map((m) => m.toString());
    assert.deepEqual(got, ['hello', '', '!'], `cut at ${cut}`);
    assert.equal(d.leftover, 0);
  }
  const partial = new FrameDecoder(100);
  assert.deepEqual(partial.push(a.subarray(0, 7)), []);
  assert.equal(partial.leftover, 7);
  assert.throws(() => new FrameDecoder(100).push(Buffer.from([1, 0, 0, 0, 1, 0])), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL') && /compressed/.test(err.message));
  assert.throws(() => new FrameDecoder(4).push(Buffer.from([0, 0, 0, 0, 5])), (err) => isWeftError(err, 'WEFT_ERR_PROTOCOL') && /5 bytes, over the limit of 4/.test(err.message));
  assert.deepEqual(new FrameDecoder(5).push(frameMessage(Buffer.from('12345'))).map(String), ['12345'], 'exactly the limit is fine');
});

test('a call\'s status: from trailers, percent-decoded; none is not success; deadlines as grpc-timeout', () => {
  assert.deepEqual(grpcOutcome({ 'grpc-status': '7', 'grpc-message': 'etcdserver:%20permission%20denied' }), { code: 7, message: 'etcdserver: permission denied' });
  assert.deepEqual(grpcOutcome({ 'grpc-status': ['0'] }), { code: 0, message: '' });
  assert.deepEqual(grpcOutcome({ 'grpc-status': '14', 'grpc-message': '100%' }), { code: 14, message: '100%' });
  assert.equal(grpcOutcome({}), undefined);
  for (const bad of ['x', '7x', 'x7', '']) assert.equal(grpcOutcome({ 'grpc-status': bad }), undefined, bad);
  assert.equal(grpcTimeout(10_000), '10000m');
  assert.equal(grpcTimeout(0.2), '1m');
  assert.equal(grpcTimeout(2e8), '200000S');
  assert.equal(grpcTimeout(99_999_999), '99999999m', 'eight digits at most');
  assert.equal(grpcTimeout(1e8), '100000S');
});

test('endpoint forms as clientv3 takes them', () => {
  const tcp = (e: ReturnType<typeof parseEtcdEndpoint>): string => ('path' in e.address ? `unix ${e.address.path}` : `${e.address.host} ${e.address.port}`) + (e.secure ? ' tls' : '');
  assert.equal(tcp(parseEtcdEndpoint('http://127.0.0.1:2379', true)), '127.0.0.1 2379');
  assert.equal(tcp(parseEtcdEndpoint('https://etcd1:2379', false)), 'etcd1 2379 tls');
  assert.equal(tcp(parseEtcdEndpoint('etcd1:2379', false)), 'etcd1 2379');
  assert.equal(tcp(parseEtcdEndpoint('etcd1:2379', true)), 'etcd1 2379 tls', 'no scheme: TLS when TLS files are given');
  assert.equal(tcp(parseEtcdEndpoint('https://[2001:db8:113::1]:2379', false)), '2001:db8:113::1 2379 tls');
  assert.equal(endpointAuthority({ host: '2001:db8:113::1', port: 2379 }), '[2001:db8:113::1]:2379');
  assert.equal(endpointAuthority({ host: 'etcd1', port: 2379 }), 'etcd1:2379');
  assert.equal(tcp(parseEtcdEndpoint('HTTPS://etcd1', false)), 'etcd1 443 tls');
  assert.equal(tcp(parseEtcdEndpoint('unix:///run/etcd.sock', false)), 'unix /run/etcd.sock');
  assert.equal(tcp(parseEtcdEndpoint('unixs://etcd.sock:0', false)), 'unix etcd.sock:0 tls');
  assert.equal(parseEtcdEndpoint('https://user:pw@etcd1:2379', false).shown, 'https://***@etcd1:2379');
  for (const bad of ['ftp://etcd1:21', 'unix://', 'http://', '::::']) assert.throws(() => parseEtcdEndpoint(bad, false), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'), bad);
});
