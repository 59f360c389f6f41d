/** A TCP relay between a client and a server that a test can cut or freeze, to break connections on demand. */
import { type Server, type Socket, connect, createServer } from 'node:net';

export interface TcpProxy extends AsyncDisposable {
  readonly port: number;
  /** Drops every connection and refuses new ones until `restore`. */
  cut(): void;
  /** Stops carrying bytes without closing anything, as a peer that vanished would (until `restore`). */
  freeze(): void;
  restore(): void;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let open = true;
  let frozen = false;
  const flow = ([client, upstream]: [Socket, Socket]): void => {
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const stop = ([client, upstream]: [Socket, Socket]): void => {
    client.unpipe(upstream);
    upstream.unpipe(client);
    client.pause();
    upstream.pause();
  };
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    for (const s of pair) s.on('error', () => undefined);
    client.on('close', () => {
      upstream.destroy();
      pairs.delete(pair);
    });
    upstream.on('close', () => client.destroy());
    if (frozen) stop(pair);
    else flow(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  if (typeof addr !== 'object' || !addr) throw new Error('proxy has no address');
  const destroyAll = (): void => {
    for (const [a, b] of pairs) {
      a.destroy();
      b.destroy();
    }
  };
  return {
    port: addr.port,
    cut() {
      open = false;
      destroyAll();
    },
    freeze() {
      frozen = true;
      for (const p of pairs) stop(p);
    },
    restore() {
      open = true;
      if (frozen) for (const p of pairs) flow(p);
      frozen = false;
    },
    async [Symbol.asyncDispose]() {
      open = false;
      destroyAll();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
