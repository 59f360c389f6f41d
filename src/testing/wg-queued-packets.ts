/**
 * Run inside a test namespace by wg-handover.netns.test.ts: two devices of weft's own WireGuard
 * data path (node A, node B) with a session between them; A stops as a graceful restart stops it
 * (its state exported, its TUN and socket kept open), `queued` packets wait in A's TUN while no
 * thread reads it, then A starts again from what it handed over. Prints A's counters after the
 * restart and how many packets B delivered, as JSON. Not part of weft's runtime.
 */
import dgram from 'node:dgram';
import { generateKeyPairSync } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import { RtNetlink } from '../netlink/rtnetlink.js';
import { type WgDeviceHandle, wgCountersOf, wireguardAddon } from '../backend/wireguard/wg-addon.js';

const queued = Number(process.argv[2] ?? '100');
const addon = wireguardAddon();
const nl = new RtNetlink();

/** A raw X25519 key pair, hex, as UAPI wants them. */
function keyPair(): { priv: string; pub: string } {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const hex = (base64url: string | undefined): string => Buffer.from(base64url!, 'base64url').toString('hex');
  return { priv: hex(privateKey.export({ format: 'jwk' }).d), pub: hex(publicKey.export({ format: 'jwk' }).x) };
}

async function device(name: string, address: string, peerNet: string): Promise<number> {
  const tun = addon.openTun(name);
  const { index } = (await nl.linkByName(name))!;
  await nl.addAddress(index, parseIp(address), 32);
  await nl.setLink(index, { up: true, mtu: 1420 });
  await nl.replaceRoute({ dst: parseCidr(peerNet), index });
  return tun;
}

function configure(handle: WgDeviceHandle, self: { priv: string }, port: number, peer: { pub: string }, endpoint: string, allowed: string): void {
  const answer = addon.uapi(handle, `set=1\nprivate_key=${self.priv}\nlisten_port=${port}\npublic_key=${peer.pub}\nendpoint=${endpoint}\nallowed_ip=${allowed}\n\n`);
  if (!answer.includes('errno=0')) throw new Error(`configure: ${answer}`);
}

const [a, b] = [keyPair(), keyPair()];
const [tunA, tunB] = [await device('wgqa', '198.18.1.0', '198.18.2.0/24'), await device('wgqb', '198.18.2.0', '198.18.1.0/24')];
const [udpA, udpB] = [addon.openUdp(51820), addon.openUdp(51821)];
const devA = addon.start(tunA, udpA, 1420, 51820);
const devB = addon.start(tunB, udpB, 1420, 51821);
configure(devA, a, 51820, b, '203.0.113.2:51821', '198.18.2.0/24');
configure(devB, b, 51821, a, '203.0.113.1:51820', '198.18.1.0/24');

const pod = dgram.createSocket('udp4');
const send = (text: string): Promise<void> => new Promise((resolve, reject) => pod.send(Buffer.from(text), 7, '198.18.2.7', (err) => (err ? reject(err) : resolve())));
const delivered = (): number => wgCountersOf(addon.counters(devB)).delivered;
// The session, made by the first packet.
await send('first');
for (let i = 0; i < 500 && delivered() < 1; i++) await delay(10);
if (delivered() < 1) throw new Error(`no session between the two devices: ${JSON.stringify(wgCountersOf(addon.counters(devA)))}`);

const state = addon.stop(devA, true);
for (let i = 0; i < queued; i++) await send(`queued ${i}`);
pod.close();
const restarted = addon.start(tunA, udpA, 1420, 51820, state);
const restored = addon.restoredPeers(restarted);
for (let i = 0; i < 500 && delivered() < 1 + queued; i++) await delay(10);
const counters = wgCountersOf(addon.counters(restarted));
const arrived = delivered() - 1;
addon.stop(restarted);
addon.stop(devB);
nl.close();
console.log(JSON.stringify({ ...counters, restored, arrived }));
