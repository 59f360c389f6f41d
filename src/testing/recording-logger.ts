/** A logger that keeps its lines for assertions, and echoes them when WEFT_TEST_LOG is set. */
import { type Logger, createLogger } from '../core/log.js';

export interface RecordedLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export interface RecordingLogger extends Logger {
  readonly lines: RecordedLine[];
}

export function recordingLogger(echo = process.env['WEFT_TEST_LOG'] !== undefined): RecordingLogger {
  const lines: RecordedLine[] = [];
  const log = createLogger({
    level: 'debug',
    write: (line) => {
      lines.push(JSON.parse(line) as RecordedLine);
      if (echo) process.stderr.write(line);
    },
  });
  return Object.assign(log, { lines });
}
