/**
 * A throwaway certificate authority with a server certificate (for 127.0.0.1 unless told
 * otherwise) and a client one (CN=client), and more client certificates on demand (etcd takes
 * the user from a client certificate's CommonName).
 * The server certificate is for server use only: weft needs nothing else of it (etcd's JSON
 * gateway, which weft no longer uses, needed clientAuth on it too).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestCa extends AsyncDisposable {
  readonly dir: string;
  readonly caFile: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  /** A client certificate from a different CA, which the server must refuse. */
  readonly strangerCert: string;
  readonly strangerKey: string;
  read(file: string): Promise<string>;
  /** Issues a client certificate with CommonName `cn`, signed by this CA. */
  client(cn: string): Promise<{ certFile: string; keyFile: string }>;
}

/** `serverIps`: the addresses the server certificate is valid for (default 127.0.0.1). */
export async function makeTestCa(options: { serverIps?: readonly string[] } = {}): Promise<TestCa> {
  const sans = (options.serverIps ?? ['127.0.0.1']).map((ip) => `IP:${ip}`).join(',');
  const dir = await mkdtemp(join(tmpdir(), 'weft-ca-'));
  const p = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): Promise<unknown> => run('openssl', args, { cwd: dir });
  const selfSigned = (name: string): Promise<unknown> =>
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p(`${name}.key`), '-out', p(`${name}.crt`), '-days', '2', '-subj', `/CN=${name}`);
  const signed = async (name: string, ext: string): Promise<void> => {
    await writeFile(p(`${name}.ext`), ext);
    await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', p(`${name}.key`), '-out', p(`${name}.csr`), '-subj', `/CN=${name}`);
    await openssl('x509', '-req', '-in', p(`${name}.csr`), '-CA', p('ca.crt'), '-CAkey', p('ca.key'), '-CAcreateserial', '-out', p(`${name}.crt`), '-days', '2', '-extfile', p(`${name}.ext`));
  };
  try {
    await selfSigned('ca');
    await signed('server', `subjectAltName=${sans}\nextendedKeyUsage=serverAuth\n`);
    await signed('client', 'extendedKeyUsage=clientAuth\n');
    await selfSigned('stranger');
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    dir,
    caFile: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    clientCert: p('client.crt'),
    clientKey: p('client.key'),
    strangerCert: p('stranger.crt'),
    strangerKey: p('stranger.key'),
    read: (file) => readFile(file, 'utf8'),
    client: async (cn) => {
      await signed(cn, 'extendedKeyUsage=clientAuth\n');
      return { certFile: p(`${cn}.crt`), keyFile: p(`${cn}.key`) };
    },
    async [Symbol.asyncDispose]() {
      await rm(dir, { recursive: true, force: true });
    },
  };
}
