/** Curve25519 keys as WireGuard writes them (standard base64 of the raw 32 bytes), over node:crypto. */
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';

/** PKCS#8 DER of an X25519 private key is this prefix and the 32 raw bytes. */
const pkcs8Prefix = Buffer.from('302e020100300506032b656e04220420', 'hex');

/** The public key of a base64 private key (what `wg pubkey` prints). */
export function x25519PublicKey(privateKey: string): string {
  const key = createPrivateKey({ key: Buffer.concat([pkcs8Prefix, Buffer.from(privateKey, 'base64')]), format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  return spki.subarray(spki.length - 32).toString('base64');
}

/** A fresh private key (what `wg genkey` prints). */
export function x25519PrivateKey(): string {
  return generateKeyPairSync('x25519').privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(pkcs8Prefix.length).toString('base64');
}

/** Standard base64 of exactly 32 bytes, padding included: a WireGuard key as `wg genkey` writes it. */
export function isX25519Key(text: string): boolean {
  return /^[A-Za-z0-9+/]{43}=$/.test(text) && Buffer.from(text, 'base64').length === 32;
}
