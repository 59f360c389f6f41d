/**
 * Run inside a test namespace by udp-forwarder.netns.test.ts: fills flannel0's queue while no
 * forwarder reads it (as during a restart), then starts one and counts what reaches the peer, a
 * socket of this process on a second address. Prints the counters as JSON. Not part of weft's runtime.
 */
import dgram from 'node:dgram';
import { setTimeout as delay } from 'node:timers/promises';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import { RtNetlink } from '../netlink/rtnetlink.js';
import { countersOf, udpTunAddon } from '../backend/udp/udp-addon.js';

const queued = Number(process.argv[2] ?? '200');
const host = (ip: string): number => Number(parseIp(ip).value);

const addon = udpTunAddon();
const tun = addon.openTun('flannel0');
const nl = new RtNetlink();
const { index } = (await nl.linkByName('flannel0'))!;
await nl.addAddress(index, parseIp('198.18.1.0'), 32);
await nl.setLink(index, { up: true });
await nl.replaceRoute({ dst: parseCidr('198.18.0.0/16'), index });
nl.close();
const udp = addon.openUdp(host('203.0.113.1'), 8285);

const peer = dgram.createSocket('udp4');
let arrived = 0;
peer.on('message', (m) => {
  if (m.length >= 28 && m[9] === 17 && m.subarray(16, 20).join('.') === '198.18.2.7') arrived++;
});
await new Promise<void>((resolve) => peer.bind(8285, '203.0.113.2', resolve));

const pod = dgram.createSocket('udp4');
for (let i = 0; i < queued; i++) await new Promise<void>((resolve, reject) => pod.send(Buffer.from(`queued ${i}`), 7, '198.18.2.7', (err) => (err ? reject(err) : resolve())));
pod.close();

const handle = addon.start(tun, udp, 1472, host('198.18.1.0'), 8285, new Uint32Array([host('198.18.2.0'), 24, host('203.0.113.2')]));
for (let i = 0; i < 500 && arrived < queued; i++) await delay(10);
const counters = countersOf(addon.counters(handle));
addon.stop(handle);
peer.close();
console.log(JSON.stringify({ ...counters, arrived }));
