/**
 * WireGuard's handshake messages built independently of weft's native code, from the paper's
 * construction (section 5.4) over node:crypto and @noble/hashes: the reference that
 * wg-protocol.test.ts compares the addon with, and the source of valid-looking hostile messages.
 */
import { createCipheriv, createHash, createHmac, createPrivateKey, createPublicKey, diffieHellman } from 'node:crypto';
import { blake2s } from '@noble/hashes/blake2.js';

const cat = (...parts: Uint8Array[]): Buffer => Buffer.concat(parts);
export const HASH = (...parts: Uint8Array[]): Buffer => createHash('blake2s256').update(cat(...parts)).digest();
const HMAC = (key: Uint8Array, data: Uint8Array): Buffer => createHmac('blake2s256', key).update(data).digest();
export function KDF(n: number, key: Uint8Array, input: Uint8Array): Buffer[] {
  const t0 = HMAC(key, input);
  const out: Buffer[] = [];
  let prev: Buffer = Buffer.alloc(0);
  for (let i = 1; i <= n; i++) out.push((prev = HMAC(t0, cat(prev, Buffer.from([i])))));
  return out;
}
const privKey = (raw: Uint8Array) => createPrivateKey({ key: cat(Buffer.from('302e020100300506032b656e04220420', 'hex'), raw), format: 'der', type: 'pkcs8' });
const pubKey = (raw: Uint8Array) => createPublicKey({ key: cat(Buffer.from('302a300506032b656e032100', 'hex'), raw), format: 'der', type: 'spki' });
export const PUB = (priv: Uint8Array): Buffer => createPublicKey(privKey(priv)).export({ format: 'der', type: 'spki' }).subarray(12);
export const DH = (priv: Uint8Array, pub: Uint8Array): Buffer => diffieHellman({ privateKey: privKey(priv), publicKey: pubKey(pub) });
export function AEAD(key: Uint8Array, counter: bigint, plain: Uint8Array, ad: Uint8Array): Buffer {
  const nonce = Buffer.alloc(12);
  nonce.writeBigUInt64LE(counter, 4);
  const c = createCipheriv('chacha20-poly1305', key, nonce, { authTagLength: 16 });
  c.setAAD(ad, { plaintextLength: plain.length });
  return cat(c.update(plain), c.final(), c.getAuthTag());
}
export const MAC = (key: Uint8Array, data: Uint8Array): Buffer => Buffer.from(blake2s(data, { key, dkLen: 16 }));
export const le32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};

/** mac1 for a message to the holder of `to` (a public key), over everything before it. */
export const mac1 = (to: Uint8Array, body: Uint8Array): Buffer => MAC(HASH(Buffer.from('mac1----'), to), body);

export interface InitiationState {
  readonly message: Buffer;
  readonly chain: Buffer;
  readonly hash: Buffer;
}

/** An initiation from static key `si` to the holder of public key `Spub_r` (mac2 zero). */
export function initiation(si: Buffer, Spub_r: Buffer, ei: Buffer, ts: Buffer, sender: number): InitiationState {
  const [Spub_i, Epub_i] = [PUB(si), PUB(ei)];
  let C = HASH(Buffer.from('Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s'));
  let H = HASH(HASH(C, Buffer.from('WireGuard v1 zx2c4 Jason@zx2c4.com')), Spub_r);
  let k: Buffer;
  [C] = KDF(1, C, Epub_i) as [Buffer];
  H = HASH(H, Epub_i);
  [C, k] = KDF(2, C, DH(ei, Spub_r)) as [Buffer, Buffer];
  const encStatic = AEAD(k, 0n, Spub_i, H);
  H = HASH(H, encStatic);
  [C, k] = KDF(2, C, DH(si, Spub_r)) as [Buffer, Buffer];
  const encTs = AEAD(k, 0n, ts, H);
  H = HASH(H, encTs);
  const body = cat(Buffer.from([1, 0, 0, 0]), le32(sender), Epub_i, encStatic, encTs);
  return { message: cat(body, mac1(Spub_r, body), Buffer.alloc(16)), chain: C, hash: H };
}

/** The response, with ephemeral `er`, to `init` from public key `Spub_i`, and both sides' transport keys. */
export function response(init: InitiationState, Spub_i: Buffer, er: Buffer, psk: Buffer, sender: number, receiver: number): { message: Buffer; initiatorSend: Buffer; initiatorReceive: Buffer } {
  const Epub_i = init.message.subarray(8, 40);
  const Epub_r = PUB(er);
  let [C, H] = [init.chain, init.hash];
  [C] = KDF(1, C, Epub_r) as [Buffer];
  H = HASH(H, Epub_r);
  [C] = KDF(1, C, DH(er, Epub_i)) as [Buffer];
  [C] = KDF(1, C, DH(er, Spub_i)) as [Buffer];
  const [C3, t, k] = KDF(3, C, psk) as [Buffer, Buffer, Buffer];
  C = C3;
  H = HASH(H, t);
  const encEmpty = AEAD(k, 0n, Buffer.alloc(0), H);
  const body = cat(Buffer.from([2, 0, 0, 0]), le32(sender), le32(receiver), Epub_r, encEmpty);
  const [send, recv] = KDF(2, C, Buffer.alloc(0)) as [Buffer, Buffer];
  return { message: cat(body, mac1(Spub_i, body), Buffer.alloc(16)), initiatorSend: send, initiatorReceive: recv };
}
