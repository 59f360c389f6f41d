/**
 * Reading JSON the way Go's encoding/json does for flannel's structs: member names match
 * case-insensitively and a later duplicate wins. Also a whitespace compactor that leaves
 * every other byte alone, as Go does for embedded raw JSON (lease BackendData).
 */
import { ErrorCodes, WeftError } from '../core/errors.js';

export type JsonObject = { readonly [key: string]: unknown };

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses `text` as a JSON object, or throws WEFT_ERR_CONFIG naming `what`. */
export function parseJsonObject(text: string, what: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new WeftError(ErrorCodes.CONFIG, `${what} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!isJsonObject(value)) throw new WeftError(ErrorCodes.CONFIG, `${what} must be a JSON object, got ${describe(value)}`);
  return value;
}

/** The member named `name`, ignoring case; the last one wins when several match. */
export function member(obj: JsonObject, name: string): unknown {
  let found: unknown = undefined;
  const lower = name.toLowerCase();
  for (const key of Object.keys(obj)) {
    if (key.toLowerCase() === lower) found = obj[key];
  }
  return found;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

/**
 * Splits the text of a JSON object into its members, each value as the raw text it had.
 * Lets a codec pass nested values through byte for byte. Throws on anything not an object.
 */
export function rawMembers(text: string): Array<[string, string]> {
  const s = compactJson(text);
  const out: Array<[string, string]> = [];
  if (s[0] !== '{' || s[s.length - 1] !== '}') throw new SyntaxError('not a JSON object');
  let i = 1;
  if (s[i] === '}') return out;
  while (i < s.length) {
    const keyEnd = skipValue(s, i);
    const key = JSON.parse(s.slice(i, keyEnd)) as unknown;
    if (typeof key !== 'string' || s[keyEnd] !== ':') throw new SyntaxError(`bad member at offset ${i}`);
    const valueEnd = skipValue(s, keyEnd + 1);
    out.push([key, s.slice(keyEnd + 1, valueEnd)]);
    if (s[valueEnd] === '}') return out;
    if (s[valueEnd] !== ',') throw new SyntaxError(`expected , at offset ${valueEnd}`);
    i = valueEnd + 1;
  }
  throw new SyntaxError('unterminated object');
}

/**
 * Removes insignificant whitespace and nothing else; validates with JSON.parse first. What flannel
 * and weft write has none (Go's encoder writes compact JSON): that text comes back as it is, after
 * one scan in native code. Otherwise the runs between whitespace are joined once, not appended a
 * character at a time: every lease of every listing comes through here (decoding 5000 lease
 * values took 75-82 ms that way, 41 ms now; docs/benchmarks.md).
 */
export function compactJson(text: string): string {
  JSON.parse(text);
  if (!/[ \t\n\r]/.test(text)) return text;
  const runs: string[] = [];
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '"') {
      i = stringEnd(text, i) - 1;
    } else if (ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r') {
      if (i > from) runs.push(text.slice(from, i));
      from = i + 1;
    }
  }
  runs.push(text.slice(from));
  return runs.join('');
}

function stringEnd(s: string, start: number): number {
  let i = start + 1;
  while (i < s.length) {
    if (s[i] === '\\') i += 2;
    else if (s[i] === '"') return i + 1;
    else i++;
  }
  throw new SyntaxError('unterminated string');
}

/** End offset of the compact JSON value starting at `start`. */
function skipValue(s: string, start: number): number {
  const ch = s[start];
  if (ch === '"') return stringEnd(s, start);
  if (ch === '{' || ch === '[') {
    let depth = 0;
    let i = start;
    while (i < s.length) {
      const c = s[i];
      if (c === '"') {
        i = stringEnd(s, i);
        continue;
      }
      if (c === '{' || c === '[') depth++;
      else if (c === '}' || c === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    throw new SyntaxError('unterminated value');
  }
  let i = start;
  while (i < s.length && s[i] !== ',' && s[i] !== '}' && s[i] !== ']' && s[i] !== ':') i++;
  if (i === start) throw new SyntaxError(`empty value at offset ${start}`);
  return i;
}
