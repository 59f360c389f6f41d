/**
 * A unix socket only root may connect to, from its first moment: made in a directory only root can
 * enter, its mode set to 0600, then renamed into place (a socket takes the process's umask when
 * made, so a chmod after listen() leaves a window). What an existing socket at `path` was is
 * replaced. Used by every socket the agent serves to root's tools: the WireGuard UAPI socket, the
 * CNI plugin's and the NetworkPolicy hook's.
 */
import { chmod, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import type { Server } from 'node:net';
import { basename, dirname, join } from 'node:path';

export async function listenPrivately(server: Server, path: string): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const private_ = await mkdtemp(join(dir, '.weft-'));
  const made = join(private_, basename(path));
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(made, () => {
        server.off('error', reject);
        resolve();
      });
    });
    await chmod(made, 0o600);
    await rename(made, path);
  } catch (err) {
    server.close();
    throw err;
  } finally {
    await rm(private_, { recursive: true, force: true });
  }
}
