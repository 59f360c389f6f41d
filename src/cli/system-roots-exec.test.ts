/**
 * The trust store end to end: bin/weft and the image's single executable (make cni-plugin) against
 * a real etcd whose certificate only a test CA signed, with that CA named by SSL_CERT_FILE or
 * SSL_CERT_DIR and no --etcd-cafile (system-roots.ts; system-roots.test.ts tests the choice).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadEtcdTls } from '../subnet/etcd/etcd-client.js';
import { startEtcd } from '../testing/etcd-server.js';
import { makeTestCa } from '../testing/test-ca.js';

const run = promisify(execFile);
const weftBin = fileURLToPath(new URL('../../../bin/weft', import.meta.url));
/** The image's executable (make cni-plugin), which carries the agent's Node flags inside. */
const singleFile = fileURLToPath(new URL('../../cni/weft', import.meta.url));

test('bin/weft and the single executable trust the CAs SSL_CERT_FILE and SSL_CERT_DIR name, not Node\'s bundled list, when --etcd-cafile is not given', { timeout: 120_000 }, async (t) => {
  const ca = await makeTestCa();
  t.after(() => ca[Symbol.asyncDispose]());
  const client = await loadEtcdTls({ caFile: ca.caFile, certFile: ca.clientCert, keyFile: ca.clientKey });
  await using etcd = await startEtcd({ tls: { caFile: ca.caFile, certFile: ca.serverCert, keyFile: ca.serverKey, client } });
  const dir = await mkdtemp(join(tmpdir(), 'weft-roots-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const empty = join(dir, 'empty.pem');
  await writeFile(empty, '');
  const hashed = join(dir, 'hashed');
  const none = join(dir, 'none');
  await mkdir(hashed);
  await mkdir(none);
  await copyFile(ca.caFile, join(hashed, 'test-ca.pem'));
  await run('openssl', ['rehash', hashed]);

  // Nothing of this machine's own trust settings (its tools get NODE_EXTRA_CA_CERTS and SSL_CERT_*).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SSL_CERT_') && !k.startsWith('FLANNELD_') && k !== 'NODE_OPTIONS' && k !== 'NODE_EXTRA_CA_CERTS'));
  const exitCode = async (p: Promise<unknown>): Promise<number> => {
    try {
      await p;
      return 0;
    } catch (err) {
      return (err as { code?: number }).code ?? -1;
    }
  };
  const args = (bin: string): string[] => [bin, 'leases', `--etcd-endpoints=${etcd.endpoint}`, `--etcd-certfile=${ca.clientCert}`, `--etcd-keyfile=${ca.clientKey}`];
  const leases = (bin: string, roots: Record<string, string>): Promise<number> => {
    const [file, ...rest] = args(bin);
    return exitCode(run(file!, rest, { env: { ...env, ...roots }, timeout: 60_000 }));
  };
  // Neither variable set: the bundle Go would read. In a mount namespace of its own, this host's
  // /etc/ssl/certs is a directory holding only the test CA as Debian's bundle, with no hash links:
  // OpenSSL's own defaults (/etc/ssl/cert.pem and the links) find nothing there.
  const certs = join(dir, 'certs');
  await mkdir(certs);
  await copyFile(ca.caFile, join(certs, 'ca-certificates.crt'));
  const goDefault = (bin: string): Promise<number> =>
    exitCode(run('unshare', ['-m', 'sh', '-c', 'mount --bind "$0" /etc/ssl/certs && exec "$@"', certs, ...args(bin)], { env, timeout: 60_000 }));
  for (const bin of [weftBin, singleFile]) {
    assert.equal(await goDefault(bin), 0, `${bin}: Debian's bundle, as Go finds it`);
    assert.equal(await leases(bin, { SSL_CERT_FILE: ca.caFile, SSL_CERT_DIR: none }), 0, `${bin}: the CA in SSL_CERT_FILE`);
    assert.equal(await leases(bin, { SSL_CERT_FILE: empty, SSL_CERT_DIR: hashed }), 0, `${bin}: the CA in SSL_CERT_DIR`);
    assert.equal(await leases(bin, { SSL_CERT_FILE: empty, SSL_CERT_DIR: none }), 1, `${bin}: no CA that signed the server's certificate`);
  }
});
