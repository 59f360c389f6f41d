/**
 * A pino-shaped structured logger: object first, message second, errors under `err`.
 * Lines go to stderr so that stdout stays free (the CNI plugin owns it for results): JSON by
 * default, or text a person reads, in the layout of flanneld's (klog's) lines.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(fields: LogFields, msg: string): void;
  info(fields: LogFields, msg: string): void;
  warn(fields: LogFields, msg: string): void;
  error(fields: LogFields, msg: string): void;
  child(fields: LogFields): Logger;
}

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface LoggerOptions {
  level?: LogLevel;
  /** Where finished lines go; stderr by default. */
  write?: (line: string) => void;
  /** Fixed fields on every line. */
  bindings?: LogFields;
  /** `json` (default, one object per line) or `text` (`I1123 05:43:01.123 vxlan] msg key=value`). */
  format?: 'json' | 'text';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const min = rank[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const make = (bindings: LogFields): Logger => {
    const emit = (level: LogLevel, fields: LogFields, msg: string): void => {
      if (rank[level] < min) return;
      const now = new Date();
      if (options.format === 'text') {
        write(textLine(level, now, bindings, serialise(fields), msg));
        return;
      }
      const line = { level, time: now.toISOString(), ...bindings, ...serialise(fields), msg };
      write(JSON.stringify(line, jsonSafe) + '\n');
    };
    return {
      debug: (f, m) => emit('debug', f, m),
      info: (f, m) => emit('info', f, m),
      warn: (f, m) => emit('warn', f, m),
      error: (f, m) => emit('error', f, m),
      child: (f) => make({ ...bindings, ...f }),
    };
  };
  return make(options.bindings ?? {});
}

/** A logger that drops everything; for library callers that pass none. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};

function serialise(fields: LogFields): LogFields {
  const err = fields['err'];
  if (!(err instanceof Error)) return fields;
  return { ...fields, err: serialiseError(err, 0) };
}

/**
 * An error as pino's serializer gives it: type, message, code, and the stack and cause that tell
 * where an unexpected one came from; causes to a depth of 3.
 */
function serialiseError(err: Error, depth: number): Record<string, unknown> {
  const { code, errno } = err as { code?: unknown; errno?: unknown };
  const cause: unknown = err.cause;
  return {
    type: err.name,
    message: err.message,
    ...(code === undefined ? {} : { code }),
    ...(errno === undefined ? {} : { errno }),
    ...(err.stack === undefined ? {} : { stack: err.stack }),
    ...(cause === undefined || depth >= 3 ? {} : { cause: cause instanceof Error ? serialiseError(cause, depth + 1) : String(cause) }),
  };
}

function jsonSafe(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** klog's layout: level letter, month and day, time, the component, then the message and the fields. */
/**
 * klog's header, as flanneld's lines have it (`Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg`),
 * so that what parses flanneld's logs parses these: the process id stands for the thread id, and
 * the component (`vxlan`, `subnet`, ...) for the source file and line, which a log line of weft's
 * does not carry.
 */
function textLine(level: LogLevel, now: Date, bindings: LogFields, fields: LogFields, msg: string): string {
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const stamp = `${pad(now.getUTCMonth() + 1)}${pad(now.getUTCDate())} ${pad(now.getUTCHours())}:${pad(now.getUTCMinutes())}:${pad(now.getUTCSeconds())}.${pad(now.getUTCMilliseconds() * 1000, 6)}`;
  const { name, component, ...rest } = { ...bindings, ...fields };
  const who = typeof component === 'string' ? component : typeof name === 'string' ? name : 'weft';
  const pairs = Object.entries(rest).map(([k, v]) => `${k}=${textValue(v)}`);
  return `${level[0]!.toUpperCase()}${stamp} ${String(process.pid).padStart(7)} ${who}] ${msg}${pairs.length > 0 ? ' ' + pairs.join(' ') : ''}\n${textStack(fields)}`;
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (typeof v === 'object' && v !== null && 'message' in v) return JSON.stringify((v as { message: unknown }).message);
  return JSON.stringify(v, jsonSafe) ?? String(v);
}

/** Under a text line, the stack of an error that is not one of weft's own: a bug, to be found. */
function textStack(fields: LogFields): string {
  const err = fields['err'] as { type?: unknown; stack?: unknown } | undefined;
  if (!err || err.type === 'WeftError' || typeof err.stack !== 'string') return '';
  return err.stack.split('\n').slice(1).map((l) => `\t${l.trim()}\n`).join('');
}
