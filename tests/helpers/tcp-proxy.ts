import net from 'node:net';

/** A TCP proxy in front of PostgreSQL that a test can cut and restore, to simulate an outage. */
export async function startTcpProxy(target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host);
        sockets.add(client).add(upstream);
        client.pipe(upstream).pipe(client);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as net.AddressInfo).port;
        resolve();
      });
    });
  await listen();
  return {
    get port() {
      return port;
    },
    /** Closes the listener and every open connection: the database "goes away". */
    async cut() {
      for (const s of sockets) s.destroy();
      sockets.clear();
      await new Promise<void>((r) => server!.close(() => r()));
    },
    /** Listens again on the same port: the database "comes back". */
    restore: listen,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => (server?.listening ? server.close(() => r()) : r()));
    },
  };
}

/** A proxy in front of the database of `url`, and the same URL through it. */
export async function proxyDatabase(url: string) {
  const u = new URL(url);
  const proxy = await startTcpProxy({ host: u.hostname, port: Number(u.port || 5432) });
  u.host = `127.0.0.1:${proxy.port}`;
  return { proxy, url: u.toString() };
}
