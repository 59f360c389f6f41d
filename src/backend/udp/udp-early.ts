/**
 * The udp packet path started from its snapshot, before the registry is reached: an agent that
 * restarts while etcd or the API server is away forwards with the last table it had, as the
 * kernel keeps forwarding for vxlan and host-gw. Once the backend is made it takes the device and
 * the socket over (through the fd handover, as after a SIGHUP) and the registry's table replaces
 * the snapshot's. Nothing is started when there is no snapshot or no `flannel0` (a first start).
 */
import { existsSync } from 'node:fs';
import { errorMessage } from '../../core/errors.js';
import { FdHandover } from '../../core/handover.js';
import type { Logger } from '../../core/log.js';
import { formatIp } from '../../ip/ip.js';
import { Forwarder } from './forwarder.js';
import { tunName } from './tun-device.js';
import { type UdpTunAddon, udpTunAddon } from './udp-addon.js';
import { readSnapshot } from './udp-snapshot.js';

export interface EarlyUdpPath {
  /** Stops forwarding and offers the device and socket to the backend through `handover`. */
  handTo(handover: FdHandover): void;
  /** Stops forwarding and closes what it opened (the config names another backend). */
  close(): void;
  /** The agent stops before the backend took over: the device and socket go to the next agent (SIGHUP), as the backend's would. */
  passOn(handover: FdHandover): void;
}

export async function startUdpFromSnapshot(o: { stateFile: string; log: Logger; handover?: FdHandover }): Promise<EarlyUdpPath | undefined> {
  const snap = await readSnapshot(o.stateFile);
  if (!snap || !existsSync(`/sys/class/net/${tunName}`)) return undefined;
  let addon: UdpTunAddon;
  try {
    addon = udpTunAddon();
  } catch {
    return undefined;
  }
  const inherited = o.handover ?? new FdHandover();
  const fds: number[] = [];
  try {
    const oldTun = inherited.take('udp-tun');
    const tun = oldTun !== undefined && addon.describeFd(oldTun).tun === tunName ? oldTun : addon.openTun(tunName);
    if (oldTun !== undefined && tun !== oldTun) addon.closeFd(oldTun);
    fds.push(tun);
    const oldSocket = inherited.take('udp-socket');
    const bound = oldSocket !== undefined ? addon.describeFd(oldSocket).udp : undefined;
    const socket = bound && bound[0] === Number(snap.bind.value) && bound[1] === snap.port ? oldSocket! : addon.openUdp(Number(snap.bind.value), snap.port);
    if (oldSocket !== undefined && socket !== oldSocket) addon.closeFd(oldSocket);
    fds.push(socket);
    for (const fd of fds) addon.keepOnExec(fd, false);
    const forwarder = new Forwarder(addon);
    forwarder.setTable(snap.tunnels);
    forwarder.start({ tunFd: tun, udpFd: socket, mtu: snap.mtu, tunAddr: snap.tunAddr, port: snap.port });
    o.log.info({ peers: snap.tunnels.length, address: `${formatIp(snap.bind)}:${snap.port}` }, 'udp: forwarding with the last known peer table until the registry answers');
    let done = false;
    return {
      handTo(handover) {
        if (done) return;
        done = true;
        forwarder.stop();
        handover.give('udp-tun', tun);
        handover.give('udp-socket', socket);
      },
      close() {
        if (done) return;
        done = true;
        forwarder.stop();
        for (const fd of fds) addon.closeFd(fd);
      },
      passOn(handover) {
        if (done) return;
        done = true;
        forwarder.stop();
        for (const fd of fds) addon.keepOnExec(fd, true);
        handover.pass('udp-tun', tun);
        handover.pass('udp-socket', socket);
      },
    };
  } catch (err) {
    for (const fd of fds) addon.closeFd(fd);
    o.log.warn({ err }, `udp: could not forward from the last known peer table; waiting for the registry: ${errorMessage(err)}`);
    return undefined;
  }
}
