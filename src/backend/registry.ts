/** The backends weft has, by flannel type name. Explicit data: nothing registers itself on import. */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { NetworkConfig } from '../config/network-config.js';
import { allocBackend } from './alloc/alloc-backend.js';
import { extensionBackend } from './extension/extension-backend.js';
import type { BackendFactory } from './backend.js';
import { hostGwBackend } from './host-gw/host-gw-backend.js';
import { udpBackend } from './udp/udp-backend.js';
import { vxlanBackend } from './vxlan/vxlan-backend.js';
import { wireguardBackend } from './wireguard/wireguard-backend.js';

export const backendFactories: ReadonlyMap<string, BackendFactory> = new Map([
  ['vxlan', vxlanBackend],
  ['host-gw', hostGwBackend],
  ['udp', udpBackend],
  ['wireguard', wireguardBackend],
  ['alloc', allocBackend],
  ['extension', extensionBackend],
]);

/** flannel's other backends: known names that this weft does not have (yet). */
const notAvailable = new Set(['ipip', 'ipsec', 'tencent-vpc']);

export function backendFactory(type: string): BackendFactory {
  const factory = backendFactories.get(type);
  if (factory) return factory;
  const have = [...backendFactories.keys()].join(', ');
  if (notAvailable.has(type)) {
    throw new WeftError(ErrorCodes.CONFIG, `the ${type} backend is not available in this version of weft; it has ${have}`);
  }
  throw new WeftError(ErrorCodes.CONFIG, `unknown backend type: ${type} (this weft supports ${have})`);
}

/**
 * Everything the agent would refuse about the config's backend, checked without touching the
 * node: the type, then the backend's own options. `weft config check` and the etcd manager's
 * config retry loop run it, so a config the agent cannot use is reported where it is written.
 */
export function checkBackend(config: NetworkConfig): void {
  backendFactory(config.backend.type).checkOptions(config);
}
