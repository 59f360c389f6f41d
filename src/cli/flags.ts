/**
 * Go `flag` syntax, as flanneld parses it (spec §9.1): `-name` or `--name`, `--name=value` or
 * `--name value`, booleans as `--name` or `--name=false`, integers in Go's notations (`0x1f`,
 * `017`, `0o17`, `0b101`, `1_000`); parsing stops at the first argument that is not a flag (what
 * follows is positional, as in Go). Flags not given on the command line are then taken from
 * `FLANNELD_<NAME>` (upper case, `-` → `_`) when that variable is non-empty; a value there that
 * does not parse keeps the default and is reported, as flanneld's flagutil does, not fatal.
 * One table drives parsing, the environment mapping and the help text, so they cannot drift.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';

export type FlagKind = 'string' | 'bool' | 'int' | 'list';

export interface FlagSpec {
  readonly name: string;
  readonly kind: FlagKind;
  readonly default: string | boolean | number | readonly string[];
  readonly doc: string;
  /** Whether `FLANNELD_<NAME>` sets it; true unless said otherwise. */
  readonly env?: boolean;
}

type ValueOf<K extends FlagKind> = K extends 'bool' ? boolean : K extends 'int' ? number : K extends 'list' ? readonly string[] : string;

export type FlagValues<T extends readonly FlagSpec[]> = { readonly [F in T[number] as F['name']]: ValueOf<F['kind']> };

export interface ParsedFlags<T extends readonly FlagSpec[]> {
  readonly values: FlagValues<T>;
  /** Names given on the command line (not from the environment or defaults). */
  readonly given: ReadonlySet<string>;
  readonly positionals: readonly string[];
  readonly help: boolean;
  /** `FLANNELD_*` values that did not parse (their flags kept the default), for the caller to log. */
  readonly envProblems: readonly string[];
}

export function envName(flag: string): string {
  return 'FLANNELD_' + flag.toUpperCase().replace(/-/g, '_');
}

export function parseFlags<const T extends readonly FlagSpec[]>(
  table: T,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedFlags<T> {
  const specs = new Map(table.map((s) => [s.name, s]));
  const values = new Map<string, string | boolean | number | readonly string[]>(table.map((s) => [s.name, s.default]));
  const given = new Set<string>();
  const positionals: string[] = [];
  let help = false;
  // A repeatable flag accumulates on the command line; from the environment it takes one value.
  const set = (spec: FlagSpec, raw: string, source: string): void => {
    const value = convert(spec, raw, source);
    if (spec.kind === 'list') {
      const before = given.has(spec.name) ? (values.get(spec.name) as readonly string[]) : [];
      values.set(spec.name, [...before, value as string]);
    } else {
      values.set(spec.name, value);
    }
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(...argv.slice(i));
      break;
    }
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const name = eq >= 0 ? body.slice(0, eq) : body;
    if (name === 'h' || name === 'help') {
      help = true;
      continue;
    }
    const spec = specs.get(name);
    if (!spec) throw new WeftError(ErrorCodes.CONFIG, `flag provided but not defined: -${name}`);
    let raw: string;
    if (eq >= 0) raw = body.slice(eq + 1);
    else if (spec.kind === 'bool') raw = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new WeftError(ErrorCodes.CONFIG, `flag needs an argument: -${name}`);
      raw = next;
      i++;
    }
    set(spec, raw, `-${name}`);
    given.add(name);
  }
  const envProblems: string[] = [];
  for (const spec of table) {
    if (given.has(spec.name) || spec.env === false) continue;
    const raw = env[envName(spec.name)];
    if (raw === undefined || raw === '') continue;
    try {
      set(spec, raw, envName(spec.name));
    } catch (err) {
      envProblems.push(`${(err as Error).message}; keeping the default, ${JSON.stringify(spec.default)}`);
    }
  }
  return { values: Object.freeze(Object.fromEntries(values)) as FlagValues<T>, given, positionals, help, envProblems };
}

function convert(spec: FlagSpec, raw: string, source: string): string | boolean | number {
  switch (spec.kind) {
    case 'bool': {
      const v = raw.toLowerCase();
      if (['1', 't', 'true'].includes(v)) return true;
      if (['0', 'f', 'false'].includes(v)) return false;
      throw new WeftError(ErrorCodes.CONFIG, `invalid boolean value ${JSON.stringify(raw)} for ${source}`);
    }
    case 'int': {
      const n = goInt(raw);
      if (n === undefined) throw new WeftError(ErrorCodes.CONFIG, `invalid integer value ${JSON.stringify(raw)} for ${source}`);
      return n;
    }
    default:
      return raw;
  }
}

/**
 * An integer as Go's strconv.ParseInt(s, 0, 64) reads it: an optional sign, then decimal, `0x`
 * hex, `0b` binary, `0o` or a leading `0` octal, with `_` between digits; undefined otherwise or
 * beyond what a number holds exactly.
 */
export function goInt(raw: string): number | undefined {
  const m = /^([+-]?)(0[xX](?:_?[0-9a-fA-F])+|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0(?:_?[0-7])+|[1-9](?:_?[0-9])*|0)$/.exec(raw);
  if (!m) return undefined;
  const body = m[2]!.replace(/_/g, '');
  const value = /^0[0-7]/.test(body) ? BigInt(`0o${body.slice(1)}`) : BigInt(body);
  const n = Number(m[1] === '-' ? -value : value);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Help text from the table. */
export function usage(table: readonly FlagSpec[]): string {
  const rows = table.map((s) => {
    const arg = s.kind === 'bool' ? '' : s.kind === 'int' ? ' <n>' : ' <value>';
    const def = Array.isArray(s.default) ? (s.default.length ? s.default.join(',') : '') : String(s.default);
    const env = s.env === false ? '' : ` [${envName(s.name)}]`;
    return `  --${s.name}${arg}\n      ${s.doc}${def !== '' && def !== 'false' ? ` (default ${def})` : ''}${env}`;
  });
  return rows.join('\n') + '\n';
}
