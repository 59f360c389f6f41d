/**
 * How to reach and authenticate to the Kubernetes API, found as flanneld finds it
 * (client-go's BuildConfigFromFlags, flannel-compat §6.1):
 * - `--kubeconfig-file`: its current context's cluster and user; `--kube-api-url` overrides the
 *   server;
 * - `--kube-api-url` alone: that server, no credentials, the system's CAs;
 * - neither: in-cluster, from KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA.
 * Credentials supported: bearer token, token file (re-read for every request, so a rotated
 * service-account token is used at once), client certificate and key (file or -data), basic auth.
 * Refused with a message naming them, never silently ignored: exec credential plugins,
 * auth-provider plugins, impersonation and proxy-url.
 */
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { ErrorCodes, WeftError, errorMessage } from '../core/errors.js';

export type KubeAuth =
  | { readonly kind: 'none' }
  | { readonly kind: 'token'; readonly token: string }
  | { readonly kind: 'token-file'; readonly path: string }
  | { readonly kind: 'basic'; readonly username: string; readonly password: string };

export interface KubeTls {
  /** PEM; absent: the system's CAs. */
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly insecureSkipVerify?: boolean;
  readonly serverName?: string;
}

export interface KubeAccess {
  readonly server: URL;
  readonly tls: KubeTls;
  readonly auth: KubeAuth;
  /** Where the settings came from, for log lines: a file, `in-cluster` or `--kube-api-url`. */
  readonly source: string;
}

export interface KubeAccessOptions {
  readonly kubeconfigFile?: string;
  readonly apiUrl?: string;
  /** KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, as the cli read them. */
  readonly serviceHost?: string;
  readonly servicePort?: string;
  /** Where the service account is mounted. */
  readonly serviceAccountDir?: string;
}

const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

export async function loadKubeAccess(options: KubeAccessOptions): Promise<KubeAccess> {
  if (options.kubeconfigFile) {
    const text = await readConfigFile(options.kubeconfigFile, '--kubeconfig-file');
    const doc = await parseYamlOrJson(text, options.kubeconfigFile);
    const selected = selectKubeconfig(doc, { file: options.kubeconfigFile, ...(options.apiUrl ? { apiUrl: options.apiUrl } : {}) });
    return resolveFiles(selected, dirname(resolve(options.kubeconfigFile)));
  }
  if (options.apiUrl) return { server: parseServer(options.apiUrl, '--kube-api-url'), tls: {}, auth: { kind: 'none' }, source: '--kube-api-url' };
  const { serviceHost: host, servicePort: port } = options;
  if (!host || !port) {
    throw new WeftError(ErrorCodes.CONFIG, 'unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined (or give --kubeconfig-file or --kube-api-url)');
  }
  const dir = options.serviceAccountDir ?? serviceAccountDir;
  const tokenPath = `${dir}/token`;
  await readConfigFile(tokenPath, 'the service account token');
  const ca = await readFile(`${dir}/ca.crt`, 'utf8').catch(() => undefined);
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return { server: parseServer(`https://${hostPart}:${port}`, 'KUBERNETES_SERVICE_HOST/PORT'), tls: ca ? { ca } : {}, auth: { kind: 'token-file', path: tokenPath }, source: 'in-cluster' };
}

/** A kubeconfig's selection before its files are read: paths still relative to the file. */
interface SelectedConfig {
  readonly server: URL;
  readonly source: string;
  readonly caFile?: string;
  readonly caData?: string;
  readonly certFile?: string;
  readonly certData?: string;
  readonly keyFile?: string;
  readonly keyData?: string;
  readonly insecureSkipVerify?: boolean;
  readonly serverName?: string;
  readonly auth: KubeAuth;
}

/**
 * Picks the current context's cluster and user out of a parsed kubeconfig (pure). Throws
 * WEFT_ERR_CONFIG naming the field for anything missing, malformed or unsupported.
 */
export function selectKubeconfig(doc: unknown, options: { file: string; apiUrl?: string }): SelectedConfig {
  const file = options.file;
  const bad = (what: string): WeftError => new WeftError(ErrorCodes.CONFIG, `kubeconfig ${file}: ${what}`);
  const root = object(doc, 'the file', bad);
  const current = optionalString(root['current-context'], 'current-context', bad);
  const contexts = namedList(root['contexts'], 'contexts', 'context', bad);
  const context = current ? contexts.get(current) : undefined;
  if (current && !context) throw bad(`context "${current}" not found`);
  if (!context && !options.apiUrl) throw bad('no current-context set');
  const clusterName = context ? optionalString(context['cluster'], 'context.cluster', bad) : undefined;
  const userName = context ? optionalString(context['user'], 'context.user', bad) : undefined;
  const cluster = clusterName ? namedList(root['clusters'], 'clusters', 'cluster', bad).get(clusterName) : undefined;
  if (clusterName && !cluster) throw bad(`cluster "${clusterName}" not found`);
  const user = userName ? namedList(root['users'], 'users', 'user', bad).get(userName) : undefined;
  if (userName && !user) throw bad(`user "${userName}" not found`);
  const c = cluster ?? {};
  const u = user ?? {};
  if (c['proxy-url'] !== undefined) throw bad(`cluster "${clusterName}" uses proxy-url, which weft does not support: the agent connects to the API server directly`);
  if (u['exec'] !== undefined) {
    const command = isObject(u['exec']) && typeof u['exec']['command'] === 'string' ? ` (command "${u['exec']['command']}")` : '';
    throw bad(`user "${userName}" uses an exec credential plugin${command}, which weft does not support; give the agent a token, tokenFile or client certificate`);
  }
  if (u['auth-provider'] !== undefined) {
    const name = isObject(u['auth-provider']) && typeof u['auth-provider']['name'] === 'string' ? ` "${u['auth-provider']['name']}"` : '';
    throw bad(`user "${userName}" uses the auth-provider plugin${name}, which weft does not support; give the agent a token, tokenFile or client certificate`);
  }
  for (const k of ['as', 'as-uid', 'as-groups', 'as-user-extra']) if (u[k] !== undefined) throw bad(`user "${userName}" uses impersonation (${k}), which weft does not support`);
  const serverText = options.apiUrl ?? optionalString(c['server'], 'cluster.server', bad);
  if (!serverText) throw bad(`cluster "${clusterName}" has no server`);
  const token = optionalString(u['token'], 'user.token', bad);
  const tokenFile = optionalString(u['tokenFile'], 'user.tokenFile', bad);
  const username = optionalString(u['username'], 'user.username', bad);
  const password = optionalString(u['password'], 'user.password', bad);
  if ((token || tokenFile) && username) throw bad(`user "${userName}": more than one authentication method found (token and basic auth)`);
  const auth: KubeAuth = token
    ? { kind: 'token', token }
    : tokenFile
      ? { kind: 'token-file', path: tokenFile }
      : username
        ? { kind: 'basic', username, password: password ?? '' }
        : { kind: 'none' };
  const field = (obj: Record<string, unknown>, key: string): string | undefined => optionalString(obj[key], key, bad);
  const data = (obj: Record<string, unknown>, key: string): string | undefined => {
    const v = field(obj, key);
    return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
  };
  const opt = <K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } => (v === undefined ? {} : ({ [k]: v } as { [P in K]?: V }));
  const insecure = c['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') throw bad('insecure-skip-tls-verify must be true or false');
  return {
    server: parseServer(serverText, options.apiUrl ? '--kube-api-url' : `kubeconfig ${file}: cluster.server`),
    source: file,
    ...opt('caFile', field(c, 'certificate-authority')),
    ...opt('caData', data(c, 'certificate-authority-data')),
    ...opt('certFile', field(u, 'client-certificate')),
    ...opt('certData', data(u, 'client-certificate-data')),
    ...opt('keyFile', field(u, 'client-key')),
    ...opt('keyData', data(u, 'client-key-data')),
    ...opt('insecureSkipVerify', insecure),
    ...opt('serverName', field(c, 'tls-server-name')),
    auth,
  };
}

async function resolveFiles(s: SelectedConfig, base: string): Promise<KubeAccess> {
  const at = (p: string): string => resolve(base, p);
  const pem = async (data: string | undefined, file: string | undefined, what: string): Promise<string | undefined> =>
    data ?? (file ? readConfigFile(at(file), `${what} of kubeconfig ${s.source}`) : undefined);
  const [ca, cert, key] = await Promise.all([
    pem(s.caData, s.caFile, 'certificate-authority'),
    pem(s.certData, s.certFile, 'client-certificate'),
    pem(s.keyData, s.keyFile, 'client-key'),
  ]);
  if ((cert === undefined) !== (key === undefined)) throw new WeftError(ErrorCodes.CONFIG, `kubeconfig ${s.source}: a client certificate needs both client-certificate and client-key`);
  const auth: KubeAuth = s.auth.kind === 'token-file' ? { kind: 'token-file', path: at(s.auth.path) } : s.auth;
  if (auth.kind === 'token-file') await readConfigFile(auth.path, `tokenFile of kubeconfig ${s.source}`);
  const tls: KubeTls = {
    ...(ca !== undefined ? { ca } : {}),
    ...(cert !== undefined && key !== undefined ? { cert, key } : {}),
    ...(s.insecureSkipVerify ? { insecureSkipVerify: true } : {}),
    ...(s.serverName ? { serverName: s.serverName } : {}),
  };
  return { server: s.server, tls, auth, source: s.source };
}

/** JSON is YAML too; the YAML parser is loaded only for files that are not JSON. */
async function parseYamlOrJson(text: string, file: string): Promise<unknown> {
  try {
    return JSON.parse(text);
  } catch {
    // not JSON: YAML below
  }
  const yaml = await import('js-yaml');
  try {
    return yaml.load(text);
  } catch (err) {
    throw new WeftError(ErrorCodes.CONFIG, `kubeconfig ${file} is not valid YAML: ${errorMessage(err)}`, { cause: err });
  }
}

async function readConfigFile(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new WeftError(ErrorCodes.CONFIG, `cannot read ${what} ${path}: ${errorMessage(err)}`, { cause: err });
  }
}

function parseServer(text: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch (err) {
    throw new WeftError(ErrorCodes.CONFIG, `${what}: ${JSON.stringify(text)} is not a URL`, { cause: err });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new WeftError(ErrorCodes.CONFIG, `${what}: ${JSON.stringify(text)} must be https:// or http://`);
  return url;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function object(v: unknown, what: string, bad: (w: string) => WeftError): Record<string, unknown> {
  if (!isObject(v)) throw bad(`${what} is not a mapping`);
  return v;
}

function optionalString(v: unknown, what: string, bad: (w: string) => WeftError): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw bad(`${what} must be a string`);
  return v;
}

/** `[{name, <inner>: {...}}]` → name → inner. */
function namedList(v: unknown, what: string, inner: string, bad: (w: string) => WeftError): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  if (v === undefined || v === null) return out;
  if (!Array.isArray(v)) throw bad(`${what} must be a list`);
  for (const item of v) {
    const entry = object(item, `an entry of ${what}`, bad);
    const name = optionalString(entry['name'], `${what}[].name`, bad);
    if (!name) throw bad(`an entry of ${what} has no name`);
    out.set(name, object(entry[inner] ?? {}, `${what} "${name}"`, bad));
  }
  return out;
}
