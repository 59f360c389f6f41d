/**
 * Discovery as kube-apiserver serves it to kubectl (legacy, unaggregated): /api, /apis, each
 * group and group-version's resources, /version; and an OpenAPI v2 document with no schemas,
 * which kubectl's client-side validation and apply need to exist (without one they refuse to
 * work), and with which they validate nothing and compute patches from their own types. Pure.
 */
import { apiVersionOf, resourceTypes } from './kube-resources.js';

export interface Document {
  readonly body: unknown;
  readonly contentType?: string;
}

const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];

function groups(): Array<{ name: string; versions: Array<{ groupVersion: string; version: string }>; preferredVersion: { groupVersion: string; version: string } }> {
  const names = [...new Set(resourceTypes.filter((t) => t.group).map((t) => t.group))];
  return names.map((name) => {
    const versions = [...new Set(resourceTypes.filter((t) => t.group === name).map((t) => t.version))].map((version) => ({ groupVersion: `${name}/${version}`, version }));
    return { name, versions, preferredVersion: versions[0]! };
  });
}

function resourceList(groupVersion: string): unknown {
  const resources = resourceTypes
    .filter((t) => apiVersionOf(t) === groupVersion)
    .flatMap((t) => [
      { name: t.plural, singularName: t.singular, namespaced: t.namespaced, kind: t.kind, verbs, ...(t.shortNames.length ? { shortNames: t.shortNames } : {}) },
      ...t.subresources.map((s) => ({ name: `${t.plural}/${s}`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] })),
    ]);
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion, resources };
}

/** Protobuf (gnostic's openapi_v2.Document, as kubectl asks for it): swagger "2.0" and an info, no paths, no definitions. */
function openApiV2(): Uint8Array {
  const field = (n: number, bytes: Uint8Array): Uint8Array => Uint8Array.from([(n << 3) | 2, bytes.length, ...bytes]);
  const text = (s: string): Uint8Array => new TextEncoder().encode(s);
  const info = Uint8Array.from([...field(1, text('Kubernetes')), ...field(2, text('v1.32.0'))]);
  return Uint8Array.from([...field(1, text('2.0')), ...field(2, info)]);
}

/** The discovery document at `path` (a GET), or undefined if `path` is not one. */
export function discovery(path: string, host: string): Document | undefined {
  if (path === '/openapi/v2') return { body: openApiV2(), contentType: 'application/octet-stream' };
  if (path === '/api') return { body: { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: host }] } };
  if (path === '/apis') return { body: { kind: 'APIGroupList', apiVersion: 'v1', groups: groups() } };
  if (path === '/version') return { body: { major: '1', minor: '32', gitVersion: 'v1.32.0', platform: 'linux/amd64' } };
  const group = groups().find((g) => path === `/apis/${g.name}`);
  if (group) return { body: { kind: 'APIGroup', apiVersion: 'v1', ...group } };
  const groupVersion = [...new Set(resourceTypes.map(apiVersionOf))].find((gv) => path === (gv === 'v1' ? '/api/v1' : `/apis/${gv}`));
  return groupVersion ? { body: resourceList(groupVersion) } : undefined;
}
