/** A client of a WireGuard UAPI socket (weft's device's, or wireguard-go's), as `wg` talks to it. */
import { connect } from 'node:net';

/** Sends one request (ending in an empty line) and resolves with the answer, errno line included. */
export function uapiRequest(socketPath: string, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(socketPath);
    let out = '';
    s.setEncoding('utf8');
    s.setTimeout(5000, () => s.destroy(new Error(`no answer on ${socketPath}`)));
    s.on('data', (d: string) => {
      out += d;
      if (/errno=-?\d+\n\n$/.test(out)) {
        s.end();
        resolve(out);
      }
    });
    s.on('error', reject);
    s.write(request);
  });
}
