/** flannel's WireGuard key file as the key store keeps it (spec wireguard.md §1.4). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCodes, WeftError } from '../core/errors.js';
import { x25519PrivateKey, x25519PublicKey } from '../core/x25519.js';
import { FileKeyStore } from './key-store.js';

async function dir(t: { after(fn: () => unknown): void }): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'weft-keys-'));
  t.after(() => rm(d, { recursive: true, force: true }));
  return d;
}
const configError = (what: RegExp) => (err: unknown): boolean => err instanceof WeftError && err.code === ErrorCodes.CONFIG && what.test(err.message);

test('absent: made, with its directory, as flannel writes it (44 characters of base64, no newline, mode 0400), and the same pair ever after', async (t) => {
  const path = join(await dir(t), 'run', 'flannel', 'wgkey');
  const pair = await new FileKeyStore(path).curve25519();
  const text = await readFile(path, 'utf8');
  assert.equal(text, pair.privateKey);
  assert.match(text, /^[A-Za-z0-9+/]{43}=$/);
  assert.equal((await stat(path)).mode & 0o777, 0o400);
  assert.equal(pair.publicKey, x25519PublicKey(pair.privateKey));
  assert.deepEqual(await new FileKeyStore(path).curve25519(), pair, 'reused by the next agent');
});

test('present: taken as it is, a trailing newline too (as `wg genkey > file` writes it)', async (t) => {
  const path = join(await dir(t), 'wgkey');
  const key = x25519PrivateKey();
  await writeFile(path, `${key}\n`);
  assert.deepEqual(await new FileKeyStore(path).curve25519(), { privateKey: key, publicKey: x25519PublicKey(key) });
  assert.equal(await readFile(path, 'utf8'), `${key}\n`, 'left as it was');
});

test('a file that holds no key, one that cannot be read and one that cannot be written stop the agent naming the file', async (t) => {
  const d = await dir(t);
  for (const bad of ['', 'not a key', Buffer.alloc(31).toString('base64'), `${x25519PrivateKey().slice(0, 43)}`, `x${x25519PrivateKey()}`]) {
    await writeFile(join(d, 'bad'), bad);
    await assert.rejects(new FileKeyStore(join(d, 'bad')).curve25519(), configError(/the key file .*bad does not hold a base64 Curve25519 key/), bad);
  }
  await mkdir(join(d, 'a-directory'));
  await assert.rejects(new FileKeyStore(join(d, 'a-directory')).curve25519(), configError(/cannot read the key file .*a-directory/));
  // Where the key would be written first (to be renamed into place) is taken by a directory.
  await mkdir(join(d, 'w', `wgkey.${process.pid}.tmp`), { recursive: true });
  await assert.rejects(new FileKeyStore(join(d, 'w', 'wgkey')).curve25519(), configError(/cannot write the key file .*w\/wgkey/));
});
