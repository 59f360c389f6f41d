/** Finding the API server and credentials as client-go's BuildConfigFromFlags does. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isWeftError } from '../core/errors.js';
import { loadKubeAccess, selectKubeconfig } from './kube-access.js';

async function dir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'weft-kubeaccess-'));
  t.after(() => rm(d, { recursive: true, force: true }));
  return d;
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');

const yaml = (user: string, extraCluster = ''): string => `apiVersion: v1
kind: Config
current-context: agent@prod
contexts:
- name: other
  context: {cluster: other, user: other}
- name: agent@prod
  context:
    cluster: prod
    user: agent
clusters:
- name: other
  cluster: {server: "https://127.0.0.1:1"}
- name: prod
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: ${b64('CA PEM')}
${extraCluster}users:
- name: other
  user: {token: nope}
- name: agent
  user:
${user}`;

test('a YAML kubeconfig: the current context\'s cluster and user; token wins over tokenFile; -data is base64', async (t) => {
  const d = await dir(t);
  const file = join(d, 'kubeconfig');
  await writeFile(file, yaml('    token: s3cret\n    tokenFile: /nonexistent\n'));
  const access = await loadKubeAccess({ kubeconfigFile: file });
  assert.equal(access.server.origin, 'https://127.0.0.1:6443');
  assert.deepEqual(access.auth, { kind: 'token', token: 's3cret' });
  assert.equal(access.tls.ca, 'CA PEM');
  assert.equal(access.source, file);
});

test('files named by the kubeconfig are read relative to it; --kube-api-url overrides the server', async (t) => {
  const d = await dir(t);
  await mkdir(join(d, 'pki'));
  await writeFile(join(d, 'pki', 'ca.crt'), 'CA');
  await writeFile(join(d, 'pki', 'client.crt'), 'CERT');
  await writeFile(join(d, 'pki', 'client.key'), 'KEY');
  await writeFile(join(d, 'token'), 'tok\n');
  const cfg = {
    'current-context': 'c',
    contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
    clusters: [{ name: 'k', cluster: { server: 'https://198.51.100.1:6443', 'certificate-authority': 'pki/ca.crt', 'tls-server-name': 'kubernetes', 'insecure-skip-tls-verify': false } }],
    users: [{ name: 'u', user: { 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key', tokenFile: 'token' } }],
  };
  await writeFile(join(d, 'kubeconfig.json'), JSON.stringify(cfg));
  const access = await loadKubeAccess({ kubeconfigFile: join(d, 'kubeconfig.json'), apiUrl: 'https://127.0.0.1:7443' });
  assert.equal(access.server.origin, 'https://127.0.0.1:7443');
  assert.deepEqual(access.tls, { ca: 'CA', cert: 'CERT', key: 'KEY', serverName: 'kubernetes' });
  assert.deepEqual(access.auth, { kind: 'token-file', path: join(d, 'token') });
});

test('in-cluster: the service host and port, the service account\'s token file and CA; IPv6 hosts in brackets', async (t) => {
  const d = await dir(t);
  await writeFile(join(d, 'token'), 'sa-token');
  await writeFile(join(d, 'ca.crt'), 'SA CA');
  const access = await loadKubeAccess({ serviceHost: '2001:db8:113::1', servicePort: '443', serviceAccountDir: d });
  assert.equal(access.server.href, 'https://[2001:db8:113::1]/');
  assert.deepEqual(access.auth, { kind: 'token-file', path: join(d, 'token') });
  assert.equal(access.tls.ca, 'SA CA');
  assert.equal(access.source, 'in-cluster');
  await assert.rejects(loadKubeAccess({}), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /KUBERNETES_SERVICE_HOST/.test(err.message));
  await assert.rejects(loadKubeAccess({ serviceHost: '127.0.0.1', servicePort: '443', serviceAccountDir: join(d, 'none') }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'));
});

test('--kube-api-url alone: that server, no credentials', async () => {
  const access = await loadKubeAccess({ apiUrl: 'http://127.0.0.1:8001' });
  assert.deepEqual(access.auth, { kind: 'none' });
  assert.equal(access.server.protocol, 'http:');
  await assert.rejects(loadKubeAccess({ apiUrl: 'ftp://x' }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'));
});

test('unsupported or broken kubeconfigs are refused with a message that names the problem', () => {
  const base = (user: Record<string, unknown>, cluster: Record<string, unknown> = {}) => ({
    'current-context': 'c',
    contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
    clusters: [{ name: 'k', cluster: { server: 'https://127.0.0.1:6443', ...cluster } }],
    users: [{ name: 'u', user }],
  });
  const cases: Array<[unknown, RegExp]> = [
    [base({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'aws' } }), /exec credential plugin \(command "aws"\)/],
    [base({ 'auth-provider': { name: 'oidc' } }), /auth-provider plugin "oidc"/],
    [base({ as: 'admin' }), /impersonation \(as\)/],
    [base({}, { 'proxy-url': 'http://proxy:3128' }), /proxy-url/],
    [base({ token: 't', username: 'u' }), /more than one authentication method/],
    [{ ...base({}), 'current-context': 'missing' }, /context "missing" not found/],
    [{ ...base({}), 'current-context': undefined }, /no current-context/],
    [base({ token: 5 }), /user\.token must be a string/],
    [[], /not a mapping/],
  ];
  for (const [doc, message] of cases) {
    assert.throws(() => selectKubeconfig(doc, { file: 'kc' }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && message.test(err.message), String(message));
  }
});

test('a client certificate needs its key; unreadable files and invalid YAML name the file', async (t) => {
  const d = await dir(t);
  await writeFile(join(d, 'cert'), 'CERT');
  await writeFile(join(d, 'kc'), yaml('    client-certificate: cert\n'));
  await assert.rejects(loadKubeAccess({ kubeconfigFile: join(d, 'kc') }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /client-certificate and client-key/.test(err.message));
  await writeFile(join(d, 'kc'), yaml('    tokenFile: missing-token\n'));
  await assert.rejects(loadKubeAccess({ kubeconfigFile: join(d, 'kc') }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message.includes(join(d, 'missing-token')));
  await writeFile(join(d, 'kc'), 'a: [unclosed');
  await assert.rejects(loadKubeAccess({ kubeconfigFile: join(d, 'kc') }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /not valid YAML/.test(err.message));
});
