/** The backends weft has, by flannel type name. Explicit data: nothing registers itself on import. */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { BackendFactory } from './backend.js';
import { hostGwBackend } from './host-gw/host-gw-backend.js';
import { vxlanBackend } from './vxlan/vxlan-backend.js';

export const backendFactories: ReadonlyMap<string, BackendFactory> = new Map([
  ['vxlan', vxlanBackend],
  ['host-gw', hostGwBackend],
]);

export function backendFactory(type: string): BackendFactory {
  const factory = backendFactories.get(type);
  if (!factory) {
    throw new WeftError(ErrorCodes.CONFIG, `unknown backend type: ${type} (this weft supports ${[...backendFactories.keys()].join(', ')})`);
  }
  return factory;
}
