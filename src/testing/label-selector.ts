/**
 * The `labelSelector` query parameter as kube-apiserver parses and applies it (apimachinery's
 * labels.Parse): `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`,
 * comma-separated requirements that must all hold. `!=` and `notin` pass objects without the
 * label. Keys and values are checked as the API checks labels. Pure.
 */

export type Operator = '=' | '==' | '!=' | 'in' | 'notin' | 'exists' | '!' | '>' | '<';

export interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  readonly values: readonly string[];
}

export type Labels = Readonly<Record<string, string>>;

const nameRe = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const subdomainRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why `key` is not a label key (a qualified name: an optional DNS subdomain prefix and `/`, then a name), or undefined. */
export function labelKeyError(key: string): string | undefined {
  const parts = key.split('/');
  const name = parts.at(-1)!;
  if (parts.length > 2) return "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/'";
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix === '') return 'prefix part must be non-empty';
    if (prefix.length > 253 || !subdomainRe.test(prefix)) return "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
  }
  if (name === '') return 'name part must be non-empty';
  if (name.length > 63) return 'name part must be no more than 63 characters';
  if (!nameRe.test(name)) return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
  return undefined;
}

/** Why `value` is not a label value (empty, or up to 63 characters of a name), or undefined. */
export function labelValueError(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63) return 'must be no more than 63 characters';
  if (!nameRe.test(value)) return "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
  return undefined;
}

interface Token {
  readonly kind: 'id' | '!' | '!=' | '=' | '==' | '>' | '<' | '(' | ')' | ',' | 'end';
  readonly text: string;
}

const symbols = '!=><(),';

function lex(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (symbols.includes(c)) {
      const two = text.slice(i, i + 2);
      const kind = two === '!=' || two === '==' ? two : (c as Token['kind']);
      tokens.push({ kind, text: kind });
      i += kind.length;
    } else {
      let j = i;
      while (j < text.length && !/\s/.test(text[j]!) && !symbols.includes(text[j]!)) j++;
      tokens.push({ kind: 'id', text: text.slice(i, j) });
      i = j;
    }
  }
  tokens.push({ kind: 'end', text: '' });
  return tokens;
}

/** Parses a labelSelector; throws an Error with kube-apiserver's message if it is not one. */
export function parseLabelSelector(text: string): Requirement[] {
  const tokens = lex(text);
  let at = 0;
  const peek = (): Token => tokens[at]!;
  const next = (): Token => tokens[at++] ?? tokens[tokens.length - 1]!;
  const shown = (t: Token): string => (t.kind === 'end' ? 'end of string' : t.text);

  const values = (): string[] => {
    const open = next();
    if (open.kind !== '(') throw new Error(`found '${shown(open)}', expected: '('`);
    const out: string[] = [];
    if (peek().kind === ')') {
      next();
      return [''];
    }
    for (;;) {
      const t = peek();
      if (t.kind === 'id') {
        out.push(next().text);
        if (peek().kind === ',') {
          next();
          if (peek().kind === ')') out.push('');
        } else if (peek().kind !== ')') throw new Error(`found '${shown(peek())}', expected: ',' or ')'`);
      } else if (t.kind === ',') {
        // `(a,,b)` and `(,a)` hold an empty value, as in kube-apiserver.
        next();
        out.push('');
      } else if (t.kind === ')') {
        next();
        return out;
      } else throw new Error(`found '${shown(t)}', expected: ',', ')' or identifier`);
    }
  };

  const requirement = (): Requirement => {
    let t = next();
    const negated = t.kind === '!';
    if (negated) t = next();
    if (t.kind !== 'id') throw new Error(`found '${shown(t)}', expected: !, identifier`);
    const key = t.text;
    const keyError = labelKeyError(key);
    if (keyError) throw new Error(`invalid label key "${key}": ${keyError}`);
    const after = peek().kind;
    if (negated) return { key, operator: '!', values: [] };
    if (after === 'end' || after === ',') return { key, operator: 'exists', values: [] };
    const op = next();
    let operator: Operator;
    let vals: string[];
    if (op.kind === 'id' && (op.text === 'in' || op.text === 'notin')) {
      operator = op.text;
      vals = values();
    } else if (op.kind === '=' || op.kind === '==' || op.kind === '!=' || op.kind === '>' || op.kind === '<') {
      operator = op.kind;
      const v = peek();
      if (v.kind === 'end' || v.kind === ',') vals = [''];
      else if (v.kind === 'id') vals = [next().text];
      else throw new Error(`found '${shown(v)}', expected: identifier`);
    } else throw new Error(`found '${shown(op)}', expected: in, notin, =, ==, !=, gt, lt`);
    if ((operator === '>' || operator === '<') && !/^-?\d+$/.test(vals[0]!)) throw new Error(`for 'Gt', 'Lt' operators, the value must be an integer`);
    for (const v of vals) {
      const valueError = labelValueError(v);
      if (valueError) throw new Error(`values[0][${key}]: Invalid value: ${JSON.stringify(v)}: ${valueError}`);
    }
    return { key, operator, values: [...new Set(vals)] };
  };

  const out: Requirement[] = [];
  for (;;) {
    const t = peek();
    if (t.kind === 'end') return out;
    if (t.kind !== 'id' && t.kind !== '!') throw new Error(`found '${shown(t)}', expected: !, identifier, or 'end of string'`);
    try {
      out.push(requirement());
    } catch (err) {
      throw new Error(`unable to parse requirement: ${(err as Error).message}`);
    }
    const sep = next();
    if (sep.kind === 'end') return out;
    if (sep.kind !== ',') throw new Error(`found '${shown(sep)}', expected: ',' or 'end of string'`);
    const following = peek();
    if (following.kind !== 'id' && following.kind !== '!') throw new Error(`found '${shown(following)}', expected: identifier after ','`);
  }
}

/** Whether labels pass every requirement (an empty selector passes everything). */
export function matchesLabels(selector: readonly Requirement[], labels: Labels = {}): boolean {
  return selector.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    const value = labels[r.key] ?? '';
    switch (r.operator) {
      case '=':
      case '==':
      case 'in':
        return has && r.values.includes(value);
      case '!=':
      case 'notin':
        return !has || !r.values.includes(value);
      case 'exists':
        return has;
      case '!':
        return !has;
      case '>':
      case '<': {
        if (!has || !/^-?\d+$/.test(value)) return false;
        const [a, b] = [BigInt(value), BigInt(r.values[0]!)];
        return r.operator === '>' ? a > b : a < b;
      }
    }
  });
}
