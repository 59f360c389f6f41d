/** A KeyStore that keeps one key pair in memory, for unit tests of backends. */
import type { KeyPair, KeyStore } from '../backend/key-store.js';
import { x25519PrivateKey, x25519PublicKey } from '../core/x25519.js';

export function memoryKeys(): KeyStore & { readonly made: number } {
  let pair: KeyPair | undefined;
  let made = 0;
  return {
    get made() {
      return made;
    },
    async curve25519() {
      if (!pair) {
        const privateKey = x25519PrivateKey();
        pair = { privateKey, publicKey: x25519PublicKey(privateKey) };
        made++;
      }
      return pair;
    },
  };
}
