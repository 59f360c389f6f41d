/**
 * weft's WireGuard protocol (native/wireguard) against an independent construction of the paper's
 * handshake (section 5.4) from node:crypto and @noble/hashes, with fixed keys; the primitives
 * against published vectors; the replay window and the timers' decisions. Needs the addon
 * (`make setup`); skipped where it was not built.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadNativeAddon } from '../../core/native-addon.js';
import { createDecipheriv } from 'node:crypto';
import { MAC, PUB, initiation, response } from '../../testing/wg-reference.js';
import { type WireguardAddon, timerActions } from './wg-addon.js';

const addon = loadNativeAddon<WireguardAddon>('wireguard', 'wireguard');
const skip = addon ? false : 'native/wireguard was not built (make setup)';
const wg = addon!;

const key = (seed: number): Buffer => Buffer.from(Array.from({ length: 32 }, (_, i) => (seed * 31 + i * 7) & 255));

/** The paper's handshake, step by step, with the indices the addon's helper uses. */
function reference(si: Buffer, sr: Buffer, psk: Buffer, ei: Buffer, er: Buffer, ts: Buffer) {
  const init = initiation(si, PUB(sr), ei, ts, 0x11223344);
  const resp = response(init, PUB(si), er, psk, 0x55667788, 0x11223344);
  return { initiation: init.message, response: resp.message, send: resp.initiatorSend, recv: resp.initiatorReceive };
}

test('a handshake with fixed keys is the paper\'s, byte for byte, with and without a preshared key', { skip }, () => {
  const ts = Buffer.from('400000006a0b0c0d01000000', 'hex');
  for (const psk of [Buffer.alloc(32), key(9)]) {
    const args = [key(1), key(2), psk, key(3), key(4), ts] as const;
    const got = wg.handshake(...args);
    const want = reference(...args);
    assert.deepEqual(Buffer.from(got.initiation), want.initiation, 'initiation');
    assert.deepEqual(Buffer.from(got.response), want.response, 'response');
    assert.deepEqual(Buffer.from(got.initiatorSend), want.send);
    assert.deepEqual(Buffer.from(got.initiatorReceive), want.recv);
    assert.deepEqual(Buffer.from(got.responderReceive), want.send);
    assert.deepEqual(Buffer.from(got.responderSend), want.recv);
  }
});

test('HChaCha20 is draft-irtf-cfrg-xchacha\'s §2.2.1 vector', { skip }, () => {
  const out = wg.hchacha20(Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex'), Buffer.from('000000090000004a0000000031415927', 'hex'));
  assert.equal(Buffer.from(out).toString('hex'), '82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc');
});

test('MAC is keyed BLAKE2s with a 16-byte output, for every key length WireGuard uses', { skip }, () => {
  for (const [keyLen, dataLen] of [[32, 0], [32, 116], [16, 132], [32, 1000], [1, 3]] as const) {
    const k = key(keyLen).subarray(0, keyLen);
    const data = Buffer.from(Array.from({ length: dataLen }, (_, i) => (i * 13) & 255));
    assert.deepEqual(Buffer.from(wg.mac(k, data)), MAC(k, data), `key ${keyLen}, data ${dataLen}`);
  }
});

test('the replay window: in order, out of order within 1984, duplicates and too-old counters', { skip }, () => {
  assert.deepEqual(wg.replay([0n, 1n, 2n, 1n, 0n]), [true, true, true, false, false]);
  assert.deepEqual(wg.replay([10n, 5n, 7n, 5n, 3n]), [true, true, true, false, true]);
  assert.deepEqual(wg.replay([5000n, 3016n, 3015n, 3017n, 3016n]), [true, true, false, true, false]);
  // A jump past the whole window clears it: the counters just below the new top are new again.
  assert.deepEqual(wg.replay([100n, 99n, 100_000n, 99_999n, 99n]), [true, true, true, true, false]);
  // Counters at the protocol's limit are refused.
  assert.deepEqual(wg.replay([2n ** 64n - 2n ** 13n - 1n, 2n ** 64n - 2n ** 13n - 2n]), [false, true]);
});

test('the timers: retries every 5 s plus jitter for 90 s, rekeys after 120 s of use, keepalives after 10 s of silence, wipes after 540 s', { skip }, () => {
  const s = 1000;
  const due = (state: Parameters<WireguardAddon['timersDue']>[0]): number => wg.timersDue(state);
  // Packets wait: a handshake at once, then retries, then giving up.
  assert.equal(due({ now: 1 * s, wantHandshake: 1, currentKeypairInitiator: -1 }), timerActions.sendInitiation);
  assert.equal(due({ now: 4 * s, attemptStarted: 1 * s, lastInitiationSent: 1 * s, currentKeypairInitiator: -1, jitterMs: 100 }), 0);
  assert.equal(due({ now: 6 * s + 99, attemptStarted: 1 * s, lastInitiationSent: 1 * s, currentKeypairInitiator: -1, jitterMs: 100 }), 0);
  assert.equal(due({ now: 6 * s + 100, attemptStarted: 1 * s, lastInitiationSent: 1 * s, currentKeypairInitiator: -1, jitterMs: 100 }), timerActions.sendInitiation);
  assert.equal(due({ now: 91 * s, attemptStarted: 1 * s, lastInitiationSent: 88 * s, currentKeypairInitiator: -1 }), timerActions.giveUp);
  // No second handshake within 5 s of the last initiation, whatever wants one.
  assert.equal(due({ now: 3 * s, wantHandshake: 1, lastInitiationSent: 1 * s, currentKeypairInitiator: -1 }), 0);
  // The initiator's session in use for 120 s: a new one. The responder's: not (the initiator rekeys).
  const used = { now: 121 * s, currentKeypairCreated: 1 * s, lastDataSent: 120 * s, lastSent: 120 * s, lastReceived: 120 * s };
  assert.equal(due({ ...used, currentKeypairInitiator: 1 }), timerActions.sendInitiation);
  assert.equal(due({ ...used, currentKeypairInitiator: 0 }), 0);
  // Data sent, nothing back for 15 s: the peer may have lost the session.
  assert.equal(due({ now: 16 * s, currentKeypairCreated: 1, currentKeypairInitiator: 0, lastDataSent: 1 * s, lastSent: 1 * s, lastReceived: 500 }), timerActions.sendInitiation);
  assert.equal(due({ now: 15 * s, currentKeypairCreated: 1, currentKeypairInitiator: 0, lastDataSent: 1 * s, lastSent: 1 * s, lastReceived: 500 }), 0);
  // Data received, nothing sent for 10 s: a keepalive, once.
  assert.equal(due({ now: 11 * s, currentKeypairCreated: 1, currentKeypairInitiator: 0, lastDataReceived: 1 * s, lastReceived: 1 * s, lastSent: 500 }), timerActions.sendKeepalive);
  assert.equal(due({ now: 11 * s, currentKeypairCreated: 1, currentKeypairInitiator: 0, lastDataReceived: 1 * s, lastReceived: 1 * s, lastSent: 2 * s }), 0);
  // A persistent keepalive: every N seconds with a session, a handshake without one.
  assert.equal(due({ now: 26 * s, currentKeypairCreated: 1 * s, currentKeypairInitiator: 1, lastSent: 1 * s, persistentKeepaliveS: 25 }), timerActions.sendKeepalive);
  assert.equal(due({ now: 25 * s, currentKeypairCreated: 1 * s, currentKeypairInitiator: 1, lastSent: 1 * s, persistentKeepaliveS: 25 }), 0);
  assert.equal(due({ now: 1 * s, currentKeypairInitiator: -1, persistentKeepaliveS: 25 }), timerActions.sendInitiation);
  // A session past 180 s is no session: no keepalive on it.
  assert.equal(due({ now: 200 * s, currentKeypairCreated: 1 * s, currentKeypairInitiator: 0, lastDataReceived: 185 * s, lastReceived: 185 * s, lastSent: 100 * s }), 0);
  // Nothing new for three times 180 s: the keys go.
  assert.ok(due({ now: 542 * s, currentKeypairCreated: 1 * s, currentKeypairInitiator: 0, lastHandshake: 1 * s }) & timerActions.wipeKeys);
  assert.equal(due({ now: 540 * s, currentKeypairCreated: 1 * s, currentKeypairInitiator: 0, lastHandshake: 1 * s }) & timerActions.wipeKeys, 0);
});

test('transport data: the header (type 4, receiver, counter), the packet padded with zeros to 16 bytes (never past the MTU), sealed as the paper says; none past the counter limit', { skip }, () => {
  const sendKey = key(11);
  const open = (d: Uint8Array, counter: bigint): Buffer => {
    const nonce = Buffer.alloc(12);
    nonce.writeBigUInt64LE(counter, 4);
    const c = createDecipheriv('chacha20-poly1305', sendKey, nonce, { authTagLength: 16 });
    const body = Buffer.from(d).subarray(16);
    c.setAuthTag(body.subarray(body.length - 16));
    return Buffer.concat([c.update(body.subarray(0, body.length - 16)), c.final()]);
  };
  for (const [len, mtu, padded] of [[0, 1420, 0], [1, 1420, 16], [16, 1420, 16], [84, 1420, 96], [1419, 1420, 1420], [1420, 1420, 1420], [1401, 1410, 1408], [1409, 1410, 1410]] as const) {
    const packet = Buffer.from(Array.from({ length: len }, (_, i) => (i * 7 + 1) & 255));
    const d = Buffer.from(wg.sealData(sendKey, 0xa1b2c3d4, 77n, packet, mtu)!);
    assert.equal(d.length, 16 + padded + 16, `${len} bytes at MTU ${mtu}`);
    assert.deepEqual([d.readUInt32LE(0), d.readUInt32LE(4), d.readBigUInt64LE(8)], [4, 0xa1b2c3d4, 77n]);
    assert.deepEqual(open(d, 77n), Buffer.concat([packet, Buffer.alloc(padded - len)]));
    assert.throws(() => open(d, 78n), 'another counter is another nonce');
  }
  // REJECT_AFTER_MESSAGES = 2^64 - 2^13 - 1: the last counter a session may use is one below it.
  assert.equal(wg.sealData(sendKey, 1, 2n ** 64n - 2n ** 13n - 1n, Buffer.alloc(20), 1420), null);
  assert.notEqual(wg.sealData(sendKey, 1, 2n ** 64n - 2n ** 13n - 2n, Buffer.alloc(20), 1420), null);
});
