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
import { netnsSkipReason } from '../testing/netns.js';

const run = promisify(execFile);
const weftBin = fileURLToPath(new URL('../../../bin/weft', import.meta.url));
/** The image's executable (make cni-plugin), which carries the agent's Node flags inside. */
const singleFile = fileURLToPath(new URL('../../cni/weft', import.meta.url));

test('bin/weft and the single executable trust the CAs SSL_CERT_FILE and SSL_CERT_DIR name, not Node\'s bundled list, when --etcd-cafile is not given', { skip: netnsSkipReason(), timeout: 120_000 }, async (t) => {
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
  // Neither variable set: the bundle Go would read. In a mount namespace of its own (private, so
  // it ends with the process), this host's /etc/ssl/certs is a directory holding only the test CA
  // as Debian's bundle, with no hash links, and /etc/ssl/cert.pem (OpenSSL's default file here) is
  // empty: OpenSSL's own default paths find nothing there.
  const certs = join(dir, 'certs');
  await mkdir(certs);
  await copyFile(ca.caFile, join(certs, 'ca-certificates.crt'));
  const hide = 'mount --bind "$0" /etc/ssl/certs && { [ ! -e /etc/ssl/cert.pem ] || mount --bind "$1" /etc/ssl/cert.pem; } && shift && exec "$@"';
  const inNamespace = (command: readonly string[]): Promise<number> =>
    exitCode(run('unshare', ['-m', '--propagation', 'private', 'sh', '-c', hide, certs, empty, ...command], { env, timeout: 60_000 }));
  // The control: there, Node under --use-openssl-ca with nothing set does not trust the server.
  const probe = `const s = require('node:tls').connect({ host: '127.0.0.1', port: ${new URL(etcd.endpoint).port} }, () => process.exit(s.authorized ? 0 : 3)); s.on('error', () => process.exit(3));`;
  assert.equal(await inNamespace([process.execPath, '--use-openssl-ca', '-e', probe]), 3, 'OpenSSL\'s own defaults do not reach the test CA in the namespace');
  for (const bin of [weftBin, singleFile]) {
    assert.equal(await inNamespace(args(bin)), 0, `${bin}: Debian's bundle, as Go finds it`);
    assert.equal(await leases(bin, { SSL_CERT_FILE: ca.caFile, SSL_CERT_DIR: none }), 0, `${bin}: the CA in SSL_CERT_FILE`);
    assert.equal(await leases(bin, { SSL_CERT_FILE: empty, SSL_CERT_DIR: hashed }), 0, `${bin}: the CA in SSL_CERT_DIR`);
    assert.equal(await leases(bin, { SSL_CERT_FILE: empty, SSL_CERT_DIR: none }), 1, `${bin}: no CA that signed the server's certificate`);
  }
});
