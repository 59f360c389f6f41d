/**
 * A pino-shaped structured logger: object first, message second, errors under `err`.
 * Lines are JSON on stderr so that stdout stays free (the CNI plugin owns it for results).
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
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const min = rank[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const make = (bindings: LogFields): Logger => {
    const emit = (level: LogLevel, fields: LogFields, msg: string): void => {
      if (rank[level] < min) return;
      const line = { level, time: new Date().toISOString(), ...bindings, ...serialise(fields), msg };
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
