/**
 * Kubernetes label selectors (metav1.LabelSelector) as NetworkPolicy uses them: matchLabels AND
 * matchExpressions, with In, NotIn, Exists and DoesNotExist; NotIn and DoesNotExist match objects
 * that lack the key. An empty selector selects everything. Pure.
 */
export type Labels = Readonly<Record<string, string>>;

export type Operator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  readonly values: readonly string[];
}

export interface LabelSelector {
  readonly matchLabels: Labels;
  readonly matchExpressions: readonly Requirement[];
}

export const everything: LabelSelector = { matchLabels: {}, matchExpressions: [] };

export function matches(selector: LabelSelector, labels: Labels): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels)) if (labels[k] !== v) return false;
  for (const r of selector.matchExpressions) {
    const has = Object.hasOwn(labels, r.key);
    switch (r.operator) {
      case 'In':
        if (!has || !r.values.includes(labels[r.key]!)) return false;
        break;
      case 'NotIn':
        if (has && r.values.includes(labels[r.key]!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}
