/**
 * WireGuard's cross-platform configuration text (wireguard.com/xplatform), both ways: what weft's
 * own data path reads and writes (native/wireguard/uapi.c), and what `wireguard-go` serves. Keys
 * are hex there and base64 in the port. Pure.
 */
import { type Cidr, formatCidr, tryParseCidr } from '../ip/cidr.js';
import { x25519PublicKey } from '../core/x25519.js';
import { formatIp, tryParseIp } from '../ip/ip.js';
import { KernelError } from './netlink.js';
import { type WgChange, type WgDevice, type WgEndpoint, type WgPeerState, isRemoval } from './wireguard.js';

const hex = (base64: string): string => Buffer.from(base64, 'base64').toString('hex');
const base64 = (hexText: string): string => Buffer.from(hexText, 'hex').toString('base64');

export function formatEndpoint(e: WgEndpoint): string {
  return e.ip.family === 6 ? `[${formatIp(e.ip)}]:${e.port}` : `${formatIp(e.ip)}:${e.port}`;
}

export function parseEndpoint(text: string): WgEndpoint | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const ip = m ? tryParseIp(m[1] ?? m[2]!) : undefined;
  const port = m ? Number(m[3]) : NaN;
  return ip && port <= 65535 ? { ip, port } : undefined;
}

/** The `set=1` request of a change. */
export function formatSet(change: WgChange): string {
  const lines = ['set=1'];
  if (change.privateKey !== undefined) lines.push(`private_key=${hex(change.privateKey)}`);
  if (change.listenPort !== undefined) lines.push(`listen_port=${change.listenPort}`);
  if (change.replacePeers) lines.push('replace_peers=true');
  for (const p of change.peers ?? []) {
    lines.push(`public_key=${hex(p.publicKey)}`);
    if (isRemoval(p)) {
      lines.push('remove=true');
      continue;
    }
    lines.push(`preshared_key=${p.presharedKey ? hex(p.presharedKey) : '0'.repeat(64)}`);
    if (p.endpoint) lines.push(`endpoint=${formatEndpoint(p.endpoint)}`);
    lines.push(`persistent_keepalive_interval=${p.keepaliveS}`, 'replace_allowed_ips=true');
    for (const c of p.allowedIps) lines.push(`allowed_ip=${formatCidr(c)}`);
  }
  return `${lines.join('\n')}\n\n`;
}

/** The errno of a response (0: done); a KernelError for a failure. */
export function checkResponse(text: string, what: string): void {
  const m = /(?:^|\n)errno=(-?\d+)\n/.exec(text);
  if (!m) throw new KernelError(`${what}: no errno in the answer`, 'EPROTO');
  const errno = Math.abs(Number(m[1]));
  if (errno !== 0) throw new KernelError(what, errnoName(errno));
}

const names: Record<number, string> = { 1: 'EPERM', 2: 'ENOENT', 5: 'EIO', 12: 'ENOMEM', 19: 'ENODEV', 22: 'EINVAL', 98: 'EADDRINUSE', 99: 'EADDRNOTAVAIL' };
const errnoName = (n: number): string => names[n] ?? `errno ${n}`;

type MutablePeer = { -readonly [K in keyof WgPeerState]: WgPeerState[K] } & { allowedIps: Cidr[] };

/** A `get=1` response. Unknown keys are skipped (newer versions add some); a malformed value fails. */
export function parseGet(text: string): WgDevice {
  checkResponse(text, 'WireGuard get');
  let listenPort = 0;
  let publicKey: string | undefined;
  const peers: MutablePeer[] = [];
  let peer: MutablePeer | undefined;
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const key = line.slice(0, eq);
    const value = line.slice(eq + 1);
    const bad = (): never => {
      throw new KernelError(`WireGuard get: a bad ${key}`, 'EPROTO');
    };
    const key32 = (): string => (/^[0-9a-f]{64}$/.test(value) ? base64(value) : bad());
    const uint = (): number => (/^\d+$/.test(value) ? Number(value) : bad());
    switch (key) {
      case 'private_key':
        // UAPI lists the private key, never the public one.
        publicKey = /^0{64}$/.test(value) ? undefined : x25519PublicKey(key32());
        break;
      case 'listen_port':
        listenPort = uint();
        break;
      case 'public_key':
        peer = { publicKey: key32(), keepaliveS: 0, allowedIps: [], rxBytes: 0, txBytes: 0 };
        peers.push(peer);
        break;
      default:
        if (!peer) break;
        switch (key) {
          case 'preshared_key':
            if (!/^0{64}$/.test(value)) peer.presharedKey = key32();
            break;
          case 'endpoint':
            peer.endpoint = parseEndpoint(value) ?? bad();
            break;
          case 'persistent_keepalive_interval':
            peer.keepaliveS = uint();
            break;
          case 'last_handshake_time_sec':
            if (uint() > 0) peer.lastHandshakeMs = uint() * 1000;
            break;
          case 'last_handshake_time_nsec':
            if (peer.lastHandshakeMs !== undefined) peer.lastHandshakeMs += Math.floor(uint() / 1e6);
            break;
          case 'rx_bytes':
            peer.rxBytes = uint();
            break;
          case 'tx_bytes':
            peer.txBytes = uint();
            break;
          case 'allowed_ip':
            peer.allowedIps.push(tryParseCidr(value) ?? bad());
            break;
        }
    }
  }
  return { listenPort, ...(publicKey ? { publicKey } : {}), peers };
}
