/** A KeyStore that keeps one key pair in memory, for unit tests of backends. */
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import type { KeyPair, KeyStore } from '../backend/key-store.js';

export function memoryKeys(): KeyStore & { readonly made: number } {
  let pair: KeyPair | undefined;
  let made = 0;
  return {
    get made() {
      return made;
    },
    async curve25519() {
      if (!pair) {
        const { privateKey } = generateKeyPairSync('x25519');
        const raw = (der: Buffer): string => der.subarray(der.length - 32).toString('base64');
        pair = { privateKey: raw(privateKey.export({ format: 'der', type: 'pkcs8' })), publicKey: raw(createPublicKey(privateKey).export({ format: 'der', type: 'spki' })) };
        made++;
      }
      return pair;
    },
  };
}
