/**
 * A file's text, refusing what is not a regular file of sane size: the CNI plugin reads subnet.env
 * and its saved state for every pod, and a FIFO or a link to /dev/zero put at such a path must not
 * hang or fill it. Opened without blocking, so a FIFO is seen for what it is instead of waiting for
 * a writer. Refusals carry an errno-like `code` (EINVAL: not a regular file, EFBIG: too large).
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

function refusal(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

export async function readBoundedFile(path: string, maxBytes: number): Promise<string> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const info = await fh.stat();
    if (!info.isFile()) throw refusal('EINVAL', 'not a regular file');
    if (info.size > maxBytes) throw refusal('EFBIG', `${info.size} bytes, more than ${maxBytes}`);
    const buf = Buffer.alloc(maxBytes + 1);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    if (bytesRead > maxBytes) throw refusal('EFBIG', `more than ${maxBytes} bytes`);
    return buf.subarray(0, bytesRead).toString('utf8');
  } finally {
    await fh.close();
  }
}
