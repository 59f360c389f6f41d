/**
 * Key material a backend keeps across restarts, as flannel keeps its WireGuard private key: one
 * file (`/run/flannel/wgkey`, or `WIREGUARD_KEY_FILE`), standard base64 of the 32-byte key, no
 * newline, mode 0400; made if absent, reused as it is otherwise, so peers' entries for this node
 * stay valid across restarts. The private key goes only to the backend that hands it to the
 * kernel; nothing logs it.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ErrorCodes, WeftError, errorMessage } from '../core/errors.js';
import { createRequire } from 'node:module';
import type * as X25519 from '../core/x25519.js';

// node:crypto is loaded when a key is made or read (wireguard only), not at every agent's start.
const require = createRequire(import.meta.url);
const x25519 = (): typeof X25519 => require('../core/x25519.js') as typeof X25519;

export interface KeyPair {
  /** Standard base64 of the raw 32-byte keys. */
  readonly privateKey: string;
  readonly publicKey: string;
}

export interface KeyStore {
  /** The node's Curve25519 key pair: read from its file, or made and written there first. */
  curve25519(): Promise<KeyPair>;
}

export class FileKeyStore implements KeyStore {
  readonly #path: string;

  constructor(path: string) {
    this.#path = path;
  }

  async curve25519(): Promise<KeyPair> {
    let text: string | undefined;
    try {
      text = await readFile(this.#path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new WeftError(ErrorCodes.CONFIG, `cannot read the key file ${this.#path}: ${errorMessage(err)}`, { cause: err });
    }
    if (text !== undefined) return keyPair(text.trim(), this.#path);
    const privateKey = x25519().x25519PrivateKey();
    // Written whole or not at all: a half-written key would be a new identity on the next start.
    const tmp = `${this.#path}.${process.pid}.tmp`;
    try {
      await mkdir(dirname(this.#path), { recursive: true });
      await writeFile(tmp, privateKey, { mode: 0o400 });
      await rename(tmp, this.#path);
    } catch (err) {
      throw new WeftError(ErrorCodes.CONFIG, `cannot write the key file ${this.#path}: ${errorMessage(err)}`, { cause: err });
    }
    return keyPair(privateKey, this.#path);
  }
}

/** The pair of a base64 private key; WEFT_ERR_CONFIG naming the file when it is not one. */
function keyPair(privateKey: string, path: string): KeyPair {
  if (!x25519().isX25519Key(privateKey)) throw new WeftError(ErrorCodes.CONFIG, `the key file ${path} does not hold a base64 Curve25519 key (44 characters)`);
  return { privateKey, publicKey: x25519().x25519PublicKey(privateKey) };
}
