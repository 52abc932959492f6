/** The thread that hosts rank 0's rendezvous server (see host.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import { isTopocollError } from '../../errors.js';
import { removeRendezvousFile } from './file.js';
import type { HostMessage, RendezvousHostOptions } from './host.js';
import { RendezvousServer } from './server.js';

const options = workerData as RendezvousHostOptions;
const post = (m: HostMessage): void => parentPort!.postMessage(m);

let server: RendezvousServer | undefined;
const finish = (): void => {
  clearTimeout(lifetime);
  if (options.file !== undefined) removeRendezvousFile(options.file);
  void server?.close().then(() => process.exit(0));
};
const lifetime = setTimeout(finish, options.lifetimeMs);

try {
  server = await RendezvousServer.listen({
    token: options.token,
    host: options.host,
    port: options.port,
    ranks: options.ranks,
    onAllConnected: () => {
      if (options.file !== undefined) removeRendezvousFile(options.file);
    },
    onAllLeft: finish,
  });
  post({ kind: 'listening', port: server.address.port });
} catch (e) {
  post(isTopocollError(e) ? { kind: 'error', code: e.code, message: e.detail, hint: e.hint } : { kind: 'error', code: 'ECONFIG', message: String(e) });
  clearTimeout(lifetime);
}
