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
  const code = (err as { code?: unknown }).code;
  return { ...fields, err: { type: err.name, message: err.message, ...(code === undefined ? {} : { code }) } };
}

function jsonSafe(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** klog's layout: level letter, month and day, time, the component, then the message and the fields. */
function textLine(level: LogLevel, now: Date, bindings: LogFields, fields: LogFields, msg: string): string {
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const stamp = `${pad(now.getUTCMonth() + 1)}${pad(now.getUTCDate())} ${pad(now.getUTCHours())}:${pad(now.getUTCMinutes())}:${pad(now.getUTCSeconds())}.${pad(now.getUTCMilliseconds(), 3)}`;
  const { name, component, ...rest } = { ...bindings, ...fields };
  const who = typeof component === 'string' ? component : typeof name === 'string' ? name : 'weft';
  const pairs = Object.entries(rest).map(([k, v]) => `${k}=${textValue(v)}`);
  return `${level[0]!.toUpperCase()}${stamp} ${who}] ${msg}${pairs.length > 0 ? ' ' + pairs.join(' ') : ''}\n`;
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (typeof v === 'object' && v !== null && 'message' in v) return JSON.stringify((v as { message: unknown }).message);
  return JSON.stringify(v, jsonSafe) ?? String(v);
}
