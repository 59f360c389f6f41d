/**
 * The kernel WireGuard's generic netlink messages (linux/wireguard.h), encoded and read by hand as
 * rt-codec.ts does rtnetlink's: the family's id from the controller, WG_CMD_GET_DEVICE (a dump,
 * whose parts the kernel splits when a device has many peers or allowed IPs) and
 * WG_CMD_SET_DEVICE. Nests carry NLA_F_NESTED and array elements type 0, as `wg` (libmnl) writes
 * them. Pure: no I/O.
 */
import type { Cidr } from '../ip/cidr.js';
import type { IpAddr } from '../ip/ip.js';
import { KernelError } from './netlink.js';
import { attr, bytesIp, ipBytes, nest, u16, u32, u8 } from './nl-attr.js';
import { NLMSG_HDRLEN, NLM_F, type RawMessage } from './rt-codec.js';
import { type WgChange, type WgDevice, type WgEndpoint, type WgPeerState, isRemoval } from './wireguard.js';

export const GENL_ID_CTRL = 0x10;
const CTRL_CMD_GETFAMILY = 3;
const CTRL_ATTR = { FAMILY_ID: 1, FAMILY_NAME: 2 } as const;
export const WG_GENL_NAME = 'wireguard';
const WG_GENL_VERSION = 1;
export const WG_CMD = { GET_DEVICE: 0, SET_DEVICE: 1 } as const;
const WGDEVICE_A = { IFINDEX: 1, IFNAME: 2, PRIVATE_KEY: 3, PUBLIC_KEY: 4, FLAGS: 5, LISTEN_PORT: 6, FWMARK: 7, PEERS: 8 } as const;
const WGDEVICE_F_REPLACE_PEERS = 1;
const WGPEER_A = { PUBLIC_KEY: 1, PRESHARED_KEY: 2, FLAGS: 3, ENDPOINT: 4, PERSISTENT_KEEPALIVE_INTERVAL: 5, LAST_HANDSHAKE_TIME: 6, RX_BYTES: 7, TX_BYTES: 8, ALLOWEDIPS: 9, PROTOCOL_VERSION: 10 } as const;
const WGPEER_F = { REMOVE_ME: 1, REPLACE_ALLOWEDIPS: 2 } as const;
const WGALLOWEDIP_A = { FAMILY: 1, IPADDR: 2, CIDR_MASK: 3 } as const;
const NLA_TYPE_MASK = 0x3fff;
const NLM_F_DUMP = 0x300;
const AF_INET = 2;
const AF_INET6 = 10;

const key = (base64: string): Buffer => Buffer.from(base64, 'base64');

/** struct sockaddr_in (16 bytes) or sockaddr_in6 (28), as WGPEER_A_ENDPOINT holds it. */
export function encodeEndpoint(e: WgEndpoint): Buffer {
  const b = Buffer.alloc(e.ip.family === 4 ? 16 : 28);
  b.writeUInt16LE(e.ip.family === 4 ? AF_INET : AF_INET6, 0);
  b.writeUInt16BE(e.port, 2);
  ipBytes(e.ip).copy(b, e.ip.family === 4 ? 4 : 8);
  return b;
}

function message(type: number, flags: number, cmd: number, attrs: readonly Buffer[]): Buffer {
  const body = Buffer.concat([Buffer.from([cmd, WG_GENL_VERSION, 0, 0]), ...attrs]);
  const out = Buffer.alloc(NLMSG_HDRLEN + body.length);
  out.writeUInt32LE(out.length, 0);
  out.writeUInt16LE(type, 4);
  out.writeUInt16LE(flags | NLM_F.REQUEST, 6);
  body.copy(out, NLMSG_HDRLEN);
  return out;
}

/** CTRL_CMD_GETFAMILY for `name`. */
export function encodeGetFamily(name: string): Buffer {
  return message(GENL_ID_CTRL, NLM_F.ACK, CTRL_CMD_GETFAMILY, [attr(CTRL_ATTR.FAMILY_NAME, Buffer.from(`${name}\0`))]);
}

/** WG_CMD_GET_DEVICE for the device `name`, as a dump. */
export function encodeGetDevice(family: number, name: string): Buffer {
  return message(family, NLM_F_DUMP, WG_CMD.GET_DEVICE, [attr(WGDEVICE_A.IFNAME, Buffer.from(`${name}\0`))]);
}

/** WG_CMD_SET_DEVICE of one change: peers are replaced whole (their allowed IPs too), or removed. */
export function encodeSetDevice(family: number, name: string, change: WgChange): Buffer {
  const attrs = [attr(WGDEVICE_A.IFNAME, Buffer.from(`${name}\0`))];
  if (change.privateKey !== undefined) attrs.push(attr(WGDEVICE_A.PRIVATE_KEY, key(change.privateKey)));
  if (change.listenPort !== undefined) attrs.push(attr(WGDEVICE_A.LISTEN_PORT, u16(change.listenPort)));
  if (change.replacePeers) attrs.push(attr(WGDEVICE_A.FLAGS, u32(WGDEVICE_F_REPLACE_PEERS)));
  if (change.peers?.length) {
    attrs.push(
      nest(
        WGDEVICE_A.PEERS,
        change.peers.map((p) => {
          if (isRemoval(p)) return nest(0, [attr(WGPEER_A.PUBLIC_KEY, key(p.publicKey)), attr(WGPEER_A.FLAGS, u32(WGPEER_F.REMOVE_ME))]);
          return nest(0, [
            attr(WGPEER_A.PUBLIC_KEY, key(p.publicKey)),
            attr(WGPEER_A.FLAGS, u32(WGPEER_F.REPLACE_ALLOWEDIPS)),
            // All zeros removes a key the peer had.
            attr(WGPEER_A.PRESHARED_KEY, p.presharedKey ? key(p.presharedKey) : Buffer.alloc(32)),
            ...(p.endpoint ? [attr(WGPEER_A.ENDPOINT, encodeEndpoint(p.endpoint))] : []),
            attr(WGPEER_A.PERSISTENT_KEEPALIVE_INTERVAL, u16(p.keepaliveS)),
            nest(WGPEER_A.ALLOWEDIPS, p.allowedIps.map((c) => nest(0, [attr(WGALLOWEDIP_A.FAMILY, u16(c.ip.family === 4 ? AF_INET : AF_INET6)), attr(WGALLOWEDIP_A.IPADDR, ipBytes(c.ip)), attr(WGALLOWEDIP_A.CIDR_MASK, u8(c.prefix))]))),
          ]);
        }),
      ),
    );
  }
  return message(family, NLM_F.ACK, WG_CMD.SET_DEVICE, attrs);
}

/** Each attribute of buf[start, end): its type (flags masked off) and payload. Stops at a malformed one. */
function* attributes(buf: Buffer, start: number, end: number): Generator<{ type: number; at: number; len: number }> {
  for (let at = start; at + 4 <= end; ) {
    const len = buf.readUInt16LE(at);
    if (len < 4 || at + len > end) return;
    yield { type: buf.readUInt16LE(at + 2) & NLA_TYPE_MASK, at: at + 4, len: len - 4 };
    at += (len + 3) & ~3;
  }
}

const bad = (what: string): never => {
  throw new KernelError(`WireGuard netlink: ${what}`, 'EPROTO');
};

/** The family id in the controller's answer to encodeGetFamily. */
export function decodeFamilyId(msg: RawMessage): number {
  for (const a of attributes(msg.buf, msg.start + 4, msg.end)) if (a.type === CTRL_ATTR.FAMILY_ID && a.len >= 2) return msg.buf.readUInt16LE(a.at);
  return bad('no family id in the controller\'s answer');
}

const decodeIp = (buf: Buffer, at: number, len: number): IpAddr | undefined => bytesIp(buf.subarray(at, at + len));

export function decodeEndpoint(buf: Buffer, at: number, len: number): WgEndpoint | undefined {
  if (len < 2) return undefined;
  const family = buf.readUInt16LE(at);
  if (family === AF_INET && len >= 16) return { ip: decodeIp(buf, at + 4, 4)!, port: buf.readUInt16BE(at + 2) };
  if (family === AF_INET6 && len >= 28) return { ip: decodeIp(buf, at + 8, 16)!, port: buf.readUInt16BE(at + 2) };
  return undefined;
}

type MutablePeer = { -readonly [K in keyof WgPeerState]: WgPeerState[K] } & { allowedIps: Cidr[] };

/**
 * The device from the parts of a WG_CMD_GET_DEVICE dump: the first holds the device's attributes,
 * and a peer whose allowed IPs did not fit one part goes on in the next under its public key.
 */
export function decodeDevice(parts: readonly RawMessage[]): WgDevice {
  let listenPort = 0;
  let publicKey: string | undefined;
  const peers = new Map<string, MutablePeer>();
  for (const msg of parts) {
    const buf = msg.buf;
    for (const a of attributes(buf, msg.start + 4, msg.end)) {
      if (a.type === WGDEVICE_A.LISTEN_PORT && a.len >= 2) listenPort = buf.readUInt16LE(a.at);
      else if (a.type === WGDEVICE_A.PUBLIC_KEY && a.len === 32) publicKey = buf.toString('base64', a.at, a.at + 32);
      else if (a.type === WGDEVICE_A.PEERS) {
        for (const p of attributes(buf, a.at, a.at + a.len)) {
          const fields = [...attributes(buf, p.at, p.at + p.len)];
          const pk = fields.find((f) => f.type === WGPEER_A.PUBLIC_KEY && f.len === 32);
          if (!pk) bad('a peer without its public key');
          const publicKey = buf.toString('base64', pk!.at, pk!.at + 32);
          let peer = peers.get(publicKey);
          if (!peer) peers.set(publicKey, (peer = { publicKey, keepaliveS: 0, allowedIps: [], rxBytes: 0, txBytes: 0 }));
          for (const f of fields) {
            switch (f.type) {
              case WGPEER_A.PRESHARED_KEY:
                if (f.len === 32 && buf.subarray(f.at, f.at + 32).some((x) => x !== 0)) peer.presharedKey = buf.toString('base64', f.at, f.at + 32);
                break;
              case WGPEER_A.ENDPOINT: {
                const e = decodeEndpoint(buf, f.at, f.len);
                if (e) peer.endpoint = e;
                break;
              }
              case WGPEER_A.PERSISTENT_KEEPALIVE_INTERVAL:
                if (f.len >= 2) peer.keepaliveS = buf.readUInt16LE(f.at);
                break;
              case WGPEER_A.LAST_HANDSHAKE_TIME:
                if (f.len >= 16) {
                  const ms = Number(buf.readBigInt64LE(f.at)) * 1000 + Math.floor(Number(buf.readBigInt64LE(f.at + 8)) / 1e6);
                  if (ms > 0) peer.lastHandshakeMs = ms;
                }
                break;
              case WGPEER_A.RX_BYTES:
                if (f.len >= 8) peer.rxBytes = Number(buf.readBigUInt64LE(f.at));
                break;
              case WGPEER_A.TX_BYTES:
                if (f.len >= 8) peer.txBytes = Number(buf.readBigUInt64LE(f.at));
                break;
              case WGPEER_A.ALLOWEDIPS:
                for (const ipAttr of attributes(buf, f.at, f.at + f.len)) {
                  let ip: IpAddr | undefined;
                  let prefix = -1;
                  for (const x of attributes(buf, ipAttr.at, ipAttr.at + ipAttr.len)) {
                    if (x.type === WGALLOWEDIP_A.IPADDR) ip = decodeIp(buf, x.at, x.len);
                    else if (x.type === WGALLOWEDIP_A.CIDR_MASK && x.len >= 1) prefix = buf.readUInt8(x.at);
                  }
                  if (!ip || prefix < 0 || prefix > (ip.family === 4 ? 32 : 128)) bad('an allowed IP without its address or mask');
                  peer.allowedIps.push({ ip: ip!, prefix });
                }
                break;
            }
          }
        }
      }
    }
  }
  return { listenPort, ...(publicKey ? { publicKey } : {}), peers: [...peers.values()] };
}
