// A StrykerJS ignorer (make mutation): no mutants in statements that only call weft's logger
// (a log call, or an `if` that only decides whether to log). Log lines are for
// people; the tests assert codes, state and the facts components publish, never log text
// (../shared/design/architecture.md, rule 10), so a mutant of a log call could only survive.
import { PluginKind, declareValuePlugin } from '@stryker-mutator/api/plugin';

const levels = new Set(['debug', 'info', 'warn', 'error']);

/** `log.warn(...)`, `this.#log.info(...)`, `this.#o.log.error(...)`, `options.log.debug(...)`. */
function isLogCall(node) {
  if (node?.type !== 'CallExpression' || node.callee.type !== 'MemberExpression') return false;
  const { object, property } = node.callee;
  if (property.type !== 'Identifier' || !levels.has(property.name)) return false;
  if (object.type === 'Identifier') return object.name === 'log';
  if (object.type !== 'MemberExpression') return false;
  const name = object.property.type === 'PrivateName' ? object.property.id.name : object.property.name;
  return name === 'log';
}

/** A statement that only logs: a log call, a block of them, or an `if` whose branches only log. */
function onlyLogs(node) {
  if (!node) return true;
  if (node.type === 'ExpressionStatement') return isLogCall(node.expression);
  if (node.type === 'BlockStatement') return node.body.length > 0 && node.body.every(onlyLogs);
  if (node.type === 'IfStatement') return onlyLogs(node.consequent) && onlyLogs(node.alternate);
  return false;
}

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'log-calls', {
    shouldIgnore(path) {
      if ((path.isExpressionStatement() || path.isIfStatement()) && onlyLogs(path.node)) return 'a log line: tests assert codes and state, not log text';
      return undefined;
    },
  }),
];
