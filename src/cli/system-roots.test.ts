/** Which CAs weft trusts when no flag names one: the system's, found as Go finds them (flanneld's behaviour). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { systemBundles, systemCertDirs, systemRootsEnv } from './system-roots.js';

test('the first bundle of Go\'s list that is a file, and Go\'s directories', () => {
  assert.deepEqual(systemRootsEnv({}, () => true), { SSL_CERT_FILE: '/etc/ssl/certs/ca-certificates.crt', SSL_CERT_DIR: '/etc/ssl/certs:/etc/pki/tls/certs' });
  // RHEL 7 has only its extracted bundle; Alpine only cert.pem.
  assert.equal(systemRootsEnv({}, (p) => p === '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem' || p === '/etc/ssl/cert.pem').SSL_CERT_FILE, '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem');
  assert.equal(systemRootsEnv({}, (p) => p === '/etc/ssl/cert.pem').SSL_CERT_FILE, '/etc/ssl/cert.pem');
  // No bundle: OpenSSL keeps its own default file (absent, as the bundles are), the directories still count.
  assert.deepEqual(systemRootsEnv({}, () => false), { SSL_CERT_DIR: '/etc/ssl/certs:/etc/pki/tls/certs' });
  // Go's crypto/x509 root_linux.go, in its order: each is found alone, and wins over every later one.
  const go = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/ca-bundle.pem', '/etc/pki/tls/cacert.pem', '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem', '/etc/ssl/cert.pem'];
  go.forEach((bundle, i) => {
    assert.equal(systemRootsEnv({}, (p) => p === bundle).SSL_CERT_FILE, bundle);
    assert.equal(systemRootsEnv({}, (p) => go.indexOf(p) >= i).SSL_CERT_FILE, bundle);
  });
  assert.deepEqual(systemBundles, go);
  assert.deepEqual(systemCertDirs, ['/etc/ssl/certs', '/etc/pki/tls/certs']);
  assert.ok(Object.isFrozen(systemBundles) && Object.isFrozen(systemCertDirs));
});

test('what the operator set stays theirs; set to nothing is not set, as for Go', () => {
  assert.deepEqual(systemRootsEnv({ SSL_CERT_FILE: '/mine.pem' }, () => true), { SSL_CERT_DIR: '/etc/ssl/certs:/etc/pki/tls/certs' });
  assert.deepEqual(systemRootsEnv({ SSL_CERT_DIR: '/my/certs' }, () => true), { SSL_CERT_FILE: '/etc/ssl/certs/ca-certificates.crt' });
  assert.deepEqual(systemRootsEnv({ SSL_CERT_FILE: '/mine.pem', SSL_CERT_DIR: '/my/certs' }, () => true), {});
  assert.deepEqual(systemRootsEnv({ SSL_CERT_FILE: '', SSL_CERT_DIR: '' }, () => true), { SSL_CERT_FILE: '/etc/ssl/certs/ca-certificates.crt', SSL_CERT_DIR: '/etc/ssl/certs:/etc/pki/tls/certs' });
});
