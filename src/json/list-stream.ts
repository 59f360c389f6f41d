/**
 * A Kubernetes List (`{"kind":"NodeList","metadata":{...},"items":[{...},...]}`) decoded as it
 * arrives: each element of `items` goes to JSON.parse on its own as soon as its last byte is in,
 * and nothing before it is kept. A list of N Nodes then never exists as one string or one object
 * graph: decoding it takes one Node's memory, not N's (a 1000-Node list is 3 MB of JSON and about
 * 10 MB once parsed; 5000 Nodes with managed fields, tens of times that).
 *
 * Only the structure is scanned here: strings (their ends found with Buffer.indexOf, escapes by
 * the number of backslashes before a quote, also across chunks), nesting, and the top-level
 * members. Values are parsed by JSON.parse, so its validation applies. Chosen over a streaming
 * parser library by measurement (docs/benchmarks.md). Most items are not scanned at all: one
 * that ends within its chunk where the next begins as the first item began (`},{"metadata":`)
 * is taken whole, JSON.parse checking the guess (#wholeItem). Pure: no I/O.
 */
export interface ListHead {
  /** Every top-level member but `items`, parsed (`metadata`, `kind`, ...). */
  readonly members: Readonly<Record<string, unknown>>;
  /** How many items were handed to `onItem`. */
  readonly items: number;
  /** How many of them were scanned byte by byte; the others were taken whole (#wholeItem). */
  readonly scanned: number;
}

export class ListStreamError extends Error {
  constructor(message: string) {
    super(`malformed list: ${message}`);
    this.name = 'ListStreamError';
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/** Where the scanner is at the top level of the list object. */
type Top = 'start' | 'first-key' | 'key' | 'colon' | 'value' | 'after-value' | 'items' | 'done';

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

/**
 * Feed chunks with `write`, then call `end`. `onItem` receives each element of the top-level
 * `items` array, parsed, in order; an exception it throws stops the decoding.
 */
export class ListStream {
  readonly #onItem: (item: unknown) => void;
  readonly #onMember: ((name: string, value: unknown) => void) | undefined;
  readonly #maxValueBytes: number;
  readonly #members: Record<string, unknown> = {};
  #items = 0;
  #top: Top = 'start';
  #member = '';
  /** Nesting below the list object: 0 at its top level. */
  #depth = 0;
  #inString = false;
  /** Backslashes at the end of the previous chunk, inside a string. */
  #backslashes = 0;
  /** The value being read (a key, a member's value, an item): pieces of earlier chunks, and where it starts in this one. */
  #pieces: Buffer[] | undefined;
  #start = 0;
  #size = 0;
  /** The capture ends at the close that brings #depth back to this; -1: a string; -2: a scalar. */
  #endDepth = 0;
  /**
   * `},` and the first item's opening up to its first key's colon (`},{"metadata":` in a list the
   * API server wrote): where each item is likely to end (#wholeItem). '' until the first item.
   */
  #boundary = '';
  #whole = 0;
  /**
   * In this chunk, where a guess can next be made: one that failed at a boundary (or found none)
   * fails for every item that starts before it, and is not made again (the work stays linear in
   * the bytes, whatever a server sends).
   */
  #guessFrom = 0;

  /** `onMember` hears each top-level member but `items` as soon as it is parsed (`metadata` comes before the items). */
  constructor(onItem: (item: unknown) => void, options: { maxValueBytes?: number; onMember?: (name: string, value: unknown) => void } = {}) {
    this.#onItem = onItem;
    this.#onMember = options.onMember;
    this.#maxValueBytes = options.maxValueBytes ?? 16 * 2 ** 20;
  }

  write(chunk: Buffer): void {
    const n = chunk.length;
    // One byte per character, so string positions are byte offsets; the scanning below then runs
    // on V8's string builtins, fast even without the optimizing compilers.
    const text = chunk.toString('latin1');
    this.#start = 0;
    this.#guessFrom = 0;
    let i = 0;
    while (i < n) {
      if (this.#inString) {
        i = this.#skipString(chunk, text, i);
        continue;
      }
      if (this.#depth > 0 && this.#pieces && this.#top === 'items') {
        // Inside an item: only quotes and brackets matter; a tight loop over them.
        i = this.#scanItem(chunk, text, i);
        continue;
      }
      const b = text.charCodeAt(i);
      if (this.#depth === 0) this.#topLevel(chunk, i, b);
      else this.#nested(chunk, i, b);
      i++;
    }
    if (this.#pieces) {
      this.#pieces.push(chunk.subarray(this.#start));
      this.#size += n - this.#start;
      if (this.#size > this.#maxValueBytes) throw new ListStreamError(`a value over ${this.#maxValueBytes} bytes`);
    }
  }

  /**
   * Scans an item from `from` until its end (then hands it over) or the chunk's; returns where
   * scanning goes on. Strings are skipped in place; brackets counted.
   */
  #scanItem(chunk: Buffer, text: string, from: number): number {
    const n = text.length;
    let depth = this.#depth;
    let i = from;
    // Nothing of the item captured yet: it began in this chunk and this is its first scan (an
    // item's strings and brackets are all gone through here), just past its first byte.
    if (this.#boundary && this.#pieces?.length === 0 && this.#start >= this.#guessFrom) {
      const end = this.#wholeItem(chunk, text, this.#start);
      if (end > 0) return end;
    }
    while (i < n) {
      const b = text.charCodeAt(i);
      if (b === QUOTE) {
        const end = stringEnd(text, i + 1, 0);
        if (end < 0) {
          this.#depth = depth;
          this.#inString = true;
          this.#backslashes = trailingBackslashes(chunk, i + 1, n, 0);
          return n;
        }
        i = end;
        continue;
      }
      if (b === OPEN_OBJECT || b === OPEN_ARRAY) depth++;
      else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
        depth--;
        if (depth === this.#endDepth) {
          this.#depth = depth;
          this.#item(JSON.parse(this.#learn(this.#take(chunk, i + 1))));
          return i + 1;
        }
      }
      i++;
    }
    this.#depth = depth;
    return n;
  }

  /**
   * The item that starts at `start` taken whole, when it ends where the next begins as the first
   * did (`},{"metadata":`) within this chunk: one search and JSON.parse, instead of a scan of its
   * brackets and strings in the interpreter (140 against about 50 ms for 5000 Nodes,
   * docs/benchmarks.md). JSON.parse is the check: from an item's first byte, only the item's
   * whole text parses (a prefix is unfinished; anything longer has a comma after the value), so a
   * boundary inside an item, or after the next one, fails and the item is scanned as before.
   * Returns where scanning goes on, or -1.
   */
  #wholeItem(chunk: Buffer, text: string, start: number): number {
    const at = text.indexOf(this.#boundary, start);
    if (at < 0) {
      this.#guessFrom = text.length;
      return -1;
    }
    let value: unknown;
    try {
      value = JSON.parse(chunk.toString('utf8', start, at + 1));
    } catch {
      this.#guessFrom = at + 1;
      return -1;
    }
    this.#pieces = undefined;
    this.#depth = this.#endDepth;
    this.#whole++;
    this.#item(value);
    return at + 1;
  }

  #item(value: unknown): void {
    this.#items++;
    this.#onItem(value);
  }

  /** The first item's text gives the boundary between items (#wholeItem); the text is returned as it came. */
  #learn(item: string): string {
    if (!this.#boundary) {
      const head = /^\{"[\w.:/-]{1,64}":/.exec(item); // ASCII only: the boundary is searched for in bytes
      if (head) this.#boundary = `},${head[0]}`;
    }
    return item;
  }

  /** Checks that the list was complete; returns its other members. */
  end(): ListHead {
    if (this.#top !== 'done') throw new ListStreamError('it ends before its last byte');
    return { members: this.#members, items: this.#items, scanned: this.#items - this.#whole };
  }

  /** A byte at the list object's own level (outside strings and nested values). */
  #topLevel(chunk: Buffer, i: number, b: number): void {
    if (this.#top === 'value' && this.#endDepth === -2 && this.#pieces) {
      // A scalar member (number, true, false, null) ends at the next comma or brace.
      if (b !== COMMA && b !== CLOSE_OBJECT) return;
      this.#setMember(JSON.parse(this.#take(chunk, i)));
      this.#top = 'after-value';
    }
    if (isSpace(b)) return;
    switch (this.#top) {
      case 'start':
        if (b !== OPEN_OBJECT) throw new ListStreamError('it is not an object');
        this.#top = 'first-key';
        return;
      case 'first-key':
      case 'key':
        if (b === CLOSE_OBJECT && this.#top === 'first-key') {
          this.#top = 'done';
          return;
        }
        if (b !== QUOTE) break;
        this.#top = 'key';
        this.#capture(i, -1);
        this.#inString = true;
        return;
      case 'colon':
        if (b !== COLON) break;
        this.#top = 'value';
        return;
      case 'value':
        if (b === OPEN_ARRAY && this.#member === 'items') {
          this.#top = 'items';
          this.#depth = 1;
          return;
        }
        if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
          this.#capture(i, 0);
          this.#depth = 1;
        } else if (b === QUOTE) {
          this.#capture(i, -1);
          this.#inString = true;
        } else {
          this.#capture(i, -2);
        }
        return;
      case 'after-value':
        if (b === COMMA) this.#top = 'key';
        else if (b === CLOSE_OBJECT) this.#top = 'done';
        else break;
        return;
      case 'done':
        break;
      case 'items':
        return;
    }
    throw new ListStreamError(`unexpected ${JSON.stringify(String.fromCharCode(b))} at the top level`);
  }

  /** A byte inside a top-level member's value or inside `items`. */
  #nested(chunk: Buffer, i: number, b: number): void {
    if (b === QUOTE) {
      this.#inString = true;
      return;
    }
    if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      // An element of items starts a capture of its own.
      if (this.#top === 'items' && this.#depth === 1 && !this.#pieces) this.#capture(i, 1);
      this.#depth++;
      return;
    }
    if (b !== CLOSE_OBJECT && b !== CLOSE_ARRAY) return;
    this.#depth--;
    // A member's value ends here (an item's end is always met in #scanItem).
    if (this.#pieces && this.#depth === this.#endDepth) {
      this.#setMember(JSON.parse(this.#take(chunk, i + 1)));
      this.#top = 'after-value';
    } else if (this.#top === 'items' && this.#depth === 0) {
      this.#top = 'after-value';
    }
  }

  /** Skips string content from `from` (its start, or this chunk's); returns where scanning goes on. */
  #skipString(chunk: Buffer, text: string, from: number): number {
    const end = stringEnd(text, from, from === 0 ? this.#backslashes : 0);
    if (end < 0) {
      this.#backslashes = trailingBackslashes(chunk, from, text.length, from === 0 ? this.#backslashes : 0);
      return text.length;
    }
    this.#backslashes = 0;
    this.#inString = false;
    if (this.#pieces && this.#endDepth === -1) this.#endString(chunk, end);
    return end;
  }

  /** A key or a string member ends at `end`. */
  #endString(chunk: Buffer, end: number): void {
    const text = this.#take(chunk, end);
    if (this.#top === 'key') {
      this.#member = JSON.parse(text) as string;
      this.#top = 'colon';
    } else {
      this.#setMember(JSON.parse(text));
      this.#top = 'after-value';
    }
  }

  /** A top-level member's value, parsed. */
  #setMember(value: unknown): void {
    this.#members[this.#member] = value;
    this.#onMember?.(this.#member, value);
  }

  #capture(start: number, endDepth: number): void {
    this.#pieces = [];
    this.#start = start;
    this.#size = 0;
    this.#endDepth = endDepth;
  }

  /** The captured text up to `end` in `chunk`; ends the capture. */
  #take(chunk: Buffer, end: number): string {
    const pieces = this.#pieces ?? [];
    pieces.push(chunk.subarray(this.#start, end));
    this.#pieces = undefined;
    return pieces.length === 1 ? pieces[0]!.toString('utf8') : Buffer.concat(pieces).toString('utf8');
  }
}

/**
 * Where the string whose content starts at `from` ends (just past its closing quote), or -1 when
 * it goes on past the chunk. A quote is escaped when an odd number of backslashes precedes it;
 * `carried` counts the ones that ended the previous chunk, when the content starts this one.
 */
function stringEnd(text: string, from: number, carried: number): number {
  let i = from;
  for (;;) {
    const q = text.indexOf('"', i);
    if (q < 0) return -1;
    let run = 0;
    let j = q - 1;
    while (j >= from && text.charCodeAt(j) === BACKSLASH) {
      run++;
      j--;
    }
    if (j < from) run += carried;
    if (run % 2 === 0) return q + 1;
    i = q + 1;
  }
}

/** Backslashes ending chunk[from, end), plus `carried` when they reach back to `from`. */
function trailingBackslashes(chunk: Buffer, from: number, end: number, carried: number): number {
  let run = 0;
  let j = end - 1;
  while (j >= from && chunk[j] === BACKSLASH) {
    run++;
    j--;
  }
  return j < from ? run + carried : run;
}
