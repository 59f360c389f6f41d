/**
 * Strategic merge patch (k8s.io/apimachinery strategicpatch) for the Pods, Namespaces and
 * NetworkPolicies of the in-test API server, enough for what `kubectl apply`, `label` and `patch`
 * send: maps merge; lists whose k8s.io/api field carries a patchMergeKey merge item by item on
 * that key, every other list is replaced; the directives `$patch` (replace, delete),
 * `$retainKeys`, `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>` are honoured.
 * Nodes keep merge-patch.ts's older rule (lists of objects with `type` merge by it). Pure.
 */
import { isObject } from './merge-patch.js';

type Json = Record<string, unknown>;

/** patchMergeKey by path from the object's root; `[]` stands for any item of a list. */
const mergeKeys: Readonly<Record<string, string>> = {
  'metadata.ownerReferences': 'uid',
  'spec.containers': 'name',
  'spec.initContainers': 'name',
  'spec.ephemeralContainers': 'name',
  'spec.volumes': 'name',
  'spec.imagePullSecrets': 'name',
  'spec.hostAliases': 'ip',
  'status.conditions': 'type',
  'status.podIPs': 'ip',
  'status.hostIPs': 'ip',
  ...Object.fromEntries(
    ['spec.containers[]', 'spec.initContainers[]', 'spec.ephemeralContainers[]'].flatMap((c) => [
      [`${c}.ports`, 'containerPort'],
      [`${c}.env`, 'name'],
      [`${c}.volumeMounts`, 'mountPath'],
      [`${c}.volumeDevices`, 'devicePath'],
    ]),
  ),
};

/** Lists of scalars with patchStrategy merge: a patch adds to them. */
const mergedScalarLists = new Set(['metadata.finalizers']);

/** Applies `patch` to a copy of `target`. */
export function strategicMerge(target: Json, patch: Json): Json {
  return mergeMap(structuredClone(target), patch, '') ?? {};
}

function mergeMap(target: Json, patch: Json, path: string): Json | undefined {
  if (patch['$patch'] === 'delete') return undefined;
  if (patch['$patch'] === 'replace') return mergeMap({}, { ...patch, $patch: undefined }, path);
  const out: Json = { ...target };
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch' || k === '$retainKeys' || k.startsWith('$setElementOrder/') || v === undefined) continue;
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      const list = k.slice('$deleteFromPrimitiveList/'.length);
      if (Array.isArray(out[list]) && Array.isArray(v)) out[list] = (out[list] as unknown[]).filter((x) => !v.includes(x));
      continue;
    }
    const at = path ? `${path}.${k}` : k;
    if (v === null) delete out[k];
    else if (isObject(v)) {
      const merged = mergeMap(isObject(out[k]) ? (out[k] as Json) : {}, v, at);
      if (merged === undefined) delete out[k];
      else out[k] = merged;
    } else if (Array.isArray(v)) out[k] = mergeList(out[k], v, at);
    else out[k] = v;
  }
  // The order `$setElementOrder/<list>` gives, whether or not the patch also changed the list.
  for (const [k, order] of Object.entries(patch)) {
    if (!k.startsWith('$setElementOrder/')) continue;
    const list = k.slice('$setElementOrder/'.length);
    const key = mergeKeys[path ? `${path}.${list}` : list];
    if (key && Array.isArray(out[list]) && Array.isArray(order)) out[list] = reorder(out[list] as unknown[], order, key);
  }
  const retain = patch['$retainKeys'];
  if (Array.isArray(retain)) for (const k of Object.keys(out)) if (!retain.includes(k)) delete out[k];
  return out;
}

function mergeList(current: unknown, patch: unknown[], path: string): unknown[] {
  const key = mergeKeys[path];
  const replace = patch.some((x) => isObject(x) && x['$patch'] === 'replace');
  const items = patch.filter((x) => !(isObject(x) && x['$patch'] === 'replace'));
  if (!Array.isArray(current) || replace || (!key && !mergedScalarLists.has(path))) {
    return items.filter((x) => !(isObject(x) && x['$patch'] === 'delete')).map((x) => (isObject(x) ? mergeMap({}, x, `${path}[]`) : x));
  }
  if (!key) return [...current, ...items.filter((x) => !current.includes(x))];
  const list = [...current];
  for (const item of items) {
    if (!isObject(item)) continue;
    const i = list.findIndex((x) => isObject(x) && x[key] === item[key]);
    if (item['$patch'] === 'delete') {
      if (i >= 0) list.splice(i, 1);
    } else if (i >= 0) list[i] = mergeMap(list[i] as Json, item, `${path}[]`);
    else list.push(mergeMap({}, item, `${path}[]`));
  }
  return list;
}

/** Items in the order `$setElementOrder` gives (by merge key), the ones it does not name after them. */
function reorder(list: unknown[], order: unknown[], key: string): unknown[] {
  const rank = (x: unknown): number => {
    const i = order.findIndex((o) => isObject(o) && isObject(x) && o[key] === x[key]);
    return i < 0 ? order.length : i;
  };
  return list.map((x, i) => ({ x, i })).sort((a, b) => rank(a.x) - rank(b.x) || a.i - b.i).map((e) => e.x);
}
