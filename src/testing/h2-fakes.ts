/**
 * HTTP/2 servers on 127.0.0.1 for the etcd client's tests: a relay in front of a real etcd that
 * can act between calls, one that answers every call as it is told, and a TCP port that accepts
 * and never speaks. Each returns its endpoint and is closed by `t.after`.
 */
import { type ServerHttp2Stream, connect, createServer } from 'node:http2';
import { type AddressInfo, type Socket, createServer as createTcpServer } from 'node:net';

interface After {
  after(fn: () => Promise<void> | void): void;
}

async function listen(t: After, server: ReturnType<typeof createServer> | ReturnType<typeof createTcpServer>): Promise<string> {
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => sockets.add(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A gRPC relay to `target` (an h2c etcd endpoint); `before(path, stream)` runs before each call goes on. */
export async function startGrpcRelay(t: After, target: string, before: (path: string, stream: ServerHttp2Stream) => Promise<void> | void): Promise<string> {
  const upstream = connect(target);
  upstream.on('error', () => undefined);
  t.after(() => void upstream.destroy());
  const server = createServer();
  server.on('stream', (down: ServerHttp2Stream, headers) => {
    down.on('error', () => undefined);
    const path = String(headers[':path']);
    void (async () => {
      await before(path, down);
      const forwarded = Object.fromEntries(Object.entries(headers).filter(([k]) => !k.startsWith(':') || k === ':path' || k === ':method'));
      const up = upstream.request(forwarded);
      up.on('error', () => down.close());
      down.pipe(up);
      up.on('response', (h) => {
        down.respond(Object.fromEntries(Object.entries(h).filter(([k]) => k === ':status' || !k.startsWith(':'))), { waitForTrailers: true });
        let trailers: Record<string, string | string[] | undefined> = {};
        up.on('trailers', (tr) => (trailers = tr));
        down.on('wantTrailers', () => down.sendTrailers(trailers));
        up.pipe(down);
      });
    })();
  });
  return listen(t, server);
}

/** Answers every call with `respond(stream, request)`. */
export async function startH2Server(t: After, respond: (stream: ServerHttp2Stream) => void): Promise<string> {
  const server = createServer();
  server.on('stream', (stream: ServerHttp2Stream) => {
    stream.on('error', () => undefined);
    respond(stream);
  });
  return listen(t, server);
}

/** A TCP port that accepts connections and never sends a byte (a hung or stopped server). */
export async function startSilentPort(t: After): Promise<string> {
  return listen(t, createTcpServer(() => undefined));
}
