/** The two patch formats the in-test API server applies to Nodes. */

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 merge patch; with `strategic`, lists of objects with `type` merge by that key (conditions). */
export function mergePatch(target: Record<string, unknown>, patch: Record<string, unknown>, strategic: boolean): Record<string, unknown> {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else if (isObject(v) && isObject(target[k])) target[k] = mergePatch(target[k] as Record<string, unknown>, v, strategic);
    else if (strategic && Array.isArray(v) && Array.isArray(target[k]) && v.every((x) => isObject(x) && typeof x['type'] === 'string')) {
      const list = [...(target[k] as Array<Record<string, unknown>>)];
      for (const item of v as Array<Record<string, unknown>>) {
        const i = list.findIndex((x) => x['type'] === item['type']);
        if (i >= 0) list[i] = mergePatch(structuredClone(list[i]!), item, strategic);
        else list.push(item);
      }
      target[k] = list;
    } else target[k] = structuredClone(v);
  }
  return target;
}
