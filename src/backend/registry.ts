/**
 * The backends weft has, by flannel type name. Explicit data: nothing registers itself on import.
 * Each is loaded when first asked for, so that an agent compiles only the backend its config names
 * (module loading is a fifth of an agent's start-up: docs/benchmarks.md).
 */
import { createRequire } from 'node:module';
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { NetworkConfig } from '../config/network-config.js';
import type * as Alloc from './alloc/alloc-backend.js';
import type * as Extension from './extension/extension-backend.js';
import type { BackendFactory } from './backend.js';
import type * as HostGw from './host-gw/host-gw-backend.js';
import type * as Udp from './udp/udp-backend.js';
import type * as Vxlan from './vxlan/vxlan-backend.js';
import type * as Wireguard from './wireguard/wireguard-backend.js';

const require = createRequire(import.meta.url);

const loaders: ReadonlyMap<string, () => BackendFactory> = new Map([
  ['vxlan', () => (require('./vxlan/vxlan-backend.js') as typeof Vxlan).vxlanBackend],
  ['host-gw', () => (require('./host-gw/host-gw-backend.js') as typeof HostGw).hostGwBackend],
  ['udp', () => (require('./udp/udp-backend.js') as typeof Udp).udpBackend],
  ['wireguard', () => (require('./wireguard/wireguard-backend.js') as typeof Wireguard).wireguardBackend],
  ['alloc', () => (require('./alloc/alloc-backend.js') as typeof Alloc).allocBackend],
  ['extension', () => (require('./extension/extension-backend.js') as typeof Extension).extensionBackend],
]);

/** The type names, in flannel's documentation order. */
export const backendTypes: readonly string[] = [...loaders.keys()];

/** flannel's other backends: known names that this weft does not have (yet). */
const notAvailable = new Set(['ipip', 'ipsec', 'tencent-vpc']);

export function backendFactory(type: string): BackendFactory {
  const load = loaders.get(type);
  if (load) return load();
  const have = backendTypes.join(', ');
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
