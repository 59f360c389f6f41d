/**
 * Newline-delimited text (a Kubernetes watch stream) cut into lines as its bytes arrive. Lines are
 * found in the bytes and decoded whole, so a UTF-8 character split between two chunks stays
 * intact (a newline byte never occurs inside a UTF-8 sequence). Pure: no I/O.
 */
export class Lines {
  readonly #pending: Buffer[] = [];
  #pendingBytes = 0;
  readonly #maxLineBytes: number;

  constructor(options: { maxLineBytes?: number } = {}) {
    this.#maxLineBytes = options.maxLineBytes ?? 16 * 2 ** 20;
  }

  /** The lines this chunk completes, without their newline. Throws LineTooLongError past the bound. */
  write(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      lines.push((this.#pending.length > 0 ? Buffer.concat([...this.#pending, piece]) : piece).toString('utf8'));
      this.#pending.length = 0;
      this.#pendingBytes = 0;
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.#pending.push(chunk.subarray(start));
      this.#pendingBytes += chunk.length - start;
      if (this.#pendingBytes > this.#maxLineBytes) throw new LineTooLongError(this.#maxLineBytes);
    }
    return lines;
  }

  /** What follows the last newline (empty when the text ended with one). */
  rest(): string {
    return Buffer.concat(this.#pending).toString('utf8');
  }
}

export class LineTooLongError extends Error {
  constructor(max: number) {
    super(`a line over ${max} bytes`);
    this.name = 'LineTooLongError';
  }
}
