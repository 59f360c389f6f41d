/**
 * The certificate authorities weft trusts when no flag names one (--etcd-certfile and
 * --etcd-keyfile without --etcd-cafile; a kubeconfig without certificate-authority): the
 * system's, as flanneld does. Go's crypto/x509 reads the first bundle of a list of distributions'
 * paths, or the file SSL_CERT_FILE names, and the directories SSL_CERT_DIR names (by default
 * /etc/ssl/certs and /etc/pki/tls/certs). Node trusts its own copy of Mozilla's list unless run
 * with --use-openssl-ca, and then OpenSSL's default paths, which read the same two variables:
 * bin/weft and the image's executable pass that flag (agentNodeFlags), and this module fills in
 * the variables as Go would find them, so that both agents trust one store, including CAs an
 * operator installed on the host.
 *
 * The flag also saves memory: Node parses its 140-odd bundled certificates on a thread of their
 * own as soon as the tls module loads (http2 loads it, and etcd's gRPC rides on http2, TLS or
 * not), and keeps them: 1.0 MB of an etcd agent's anonymous memory (docs/benchmarks.md).
 */

/** Go's crypto/x509 root_linux.go: the bundles, in the order it looks for them. */
export const systemBundles: readonly string[] = Object.freeze([
  '/etc/ssl/certs/ca-certificates.crt', // Debian, Ubuntu, Gentoo
  '/etc/pki/tls/certs/ca-bundle.crt', // Fedora, RHEL 6
  '/etc/ssl/ca-bundle.pem', // OpenSUSE
  '/etc/pki/tls/cacert.pem', // OpenELEC
  '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem', // CentOS, RHEL 7
  '/etc/ssl/cert.pem', // Alpine
]);

/** Go's directories of certificates. OpenSSL reads them by subject hash (c_rehash's links, which Debian's and Alpine's tools make). */
export const systemCertDirs: readonly string[] = Object.freeze(['/etc/ssl/certs', '/etc/pki/tls/certs']);

/**
 * What to set in the environment so that OpenSSL's default paths are Go's: SSL_CERT_FILE as the
 * first bundle `readable` accepts, SSL_CERT_DIR as Go's directories, each unless the operator set
 * it. Set to nothing counts as not set, as for Go (OpenSSL would take "" for a path and trust
 * nothing).
 *
 * One difference stays: Go reads every file of a directory, OpenSSL only the subject-hash names
 * (`openssl rehash` or c_rehash makes them; Debian's and Alpine's update-ca-certificates do).
 */
export function systemRootsEnv(env: Readonly<Record<string, string | undefined>>, readable: (path: string) => boolean): { SSL_CERT_FILE?: string; SSL_CERT_DIR?: string } {
  const out: { SSL_CERT_FILE?: string; SSL_CERT_DIR?: string } = {};
  if (!env['SSL_CERT_FILE']) {
    const bundle = systemBundles.find(readable);
    if (bundle !== undefined) out.SSL_CERT_FILE = bundle;
  }
  if (!env['SSL_CERT_DIR']) out.SSL_CERT_DIR = systemCertDirs.join(':');
  return out;
}
