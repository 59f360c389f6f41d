/**
 * etcd endpoints in the forms flanneld's etcd client (clientv3) takes: `http://host:port`,
 * `https://host:port`, `host:port` (TLS when TLS files are given, as clientv3 does), and unix
 * sockets `unix://path` / `unixs://path` (TLS over the socket). Pure.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';

export interface EtcdEndpoint {
  /** As logs and errors show it (credentials in the URL redacted). */
  readonly shown: string;
  readonly secure: boolean;
  /** A TCP address, or a unix socket's path. */
  readonly address: { readonly host: string; readonly port: number } | { readonly path: string };
}

export function parseEtcdEndpoint(text: string, tlsGiven: boolean): EtcdEndpoint {
  const shown = redactCredentials(text);
  const bad = (why: string): WeftError => new WeftError(ErrorCodes.CONFIG, `invalid etcd endpoint ${JSON.stringify(shown)}: ${why}`);
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\//.exec(text)?.[1]?.toLowerCase();
  if (scheme === 'unix' || scheme === 'unixs') {
    // clientv3 takes everything after the scheme as the path: `unix://etcd.sock` is relative.
    const path = text.slice(scheme.length + 3);
    if (path === '') throw bad('no socket path');
    return { shown, secure: scheme === 'unixs', address: { path } };
  }
  if (scheme !== undefined && scheme !== 'http' && scheme !== 'https') throw bad('the scheme must be http, https, unix or unixs');
  let url: URL;
  try {
    url = new URL(scheme === undefined ? `tcp://${text}` : text);
  } catch {
    throw bad('not host:port or a URL');
  }
  if (url.hostname === '') throw bad('no host');
  const secure = scheme === 'https' || (scheme === undefined && tlsGiven);
  const port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
  // An IPv6 literal keeps its brackets in URL.hostname; sockets want it bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return { shown, secure, address: { host, port } };
}

/** A TCP endpoint as an origin's host and port (an IPv6 literal in brackets). */
export function endpointAuthority(address: { readonly host: string; readonly port: number }): string {
  const { host, port } = address;
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * An endpoint as logs, errors and `/status` may show it: a `user:password@` in it (flanneld takes
 * credentials from flags, but operators paste them into URLs too) becomes `***@`.
 */
export function redactCredentials(endpoint: string): string {
  return endpoint.replace(/^([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)[^/?#]*@/, '$1***@');
}
