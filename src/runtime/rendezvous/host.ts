/**
 * Rank 0's rendezvous server, hosted on a worker thread of its own.
 *
 * Rank 0 is also a rank: right after its part of init it may block its JavaScript thread in
 * native calls (waiting for its node's ranks to map the segment, or a `*Sync` collective right
 * after `init()`), while other ranks still need answers from the server. On its own thread the
 * server answers whatever the main thread does. The worker ends by itself once every rank has
 * connected and left (each rank closes its rendezvous connection at the end of init), or when
 * `lifetimeMs` has passed; until then it keeps the process alive, and no longer.
 *
 * A private file (`file`: port, token and the writer's pid, mode 0600) tells the ranks of this
 * machine where the server is and which token it wants; the worker removes it once every rank
 * has connected, and rank 0 removes it at exit whatever happened before.
 */
import { Worker } from 'node:worker_threads';
import { TopocollError } from '../../errors.js';
import { removeRendezvousFile, writeRendezvousFile } from './file.js';

export interface RendezvousHostOptions {
  token: string;
  host: string;
  /** 0: any free port. */
  port: number;
  ranks: number;
  /** Longest the server lives (the init timeout): a rank that never comes cannot hold rank 0 at exit. */
  lifetimeMs: number;
  /** The private file to write before listening and remove once every rank connected. */
  file?: string;
}

/** What the worker reports to the thread that started it. */
export type HostMessage = { kind: 'listening'; port: number } | { kind: 'error'; code: string; message: string; hint?: string };

export interface HostedRendezvous {
  port: number;
  /**
   * Rank 0's init failed: removes the file, and lets the process exit without waiting for the
   * server (which has told every connected rank of the abort by then).
   */
  release(): void;
}

export async function hostRendezvous(options: RendezvousHostOptions): Promise<HostedRendezvous> {
  // The file goes first when the port is known, so that a rank which reaches the server and
  // finds no file knows it runs on another machine (see connectRendezvous).
  if (options.file !== undefined && options.port !== 0) writeRendezvousFile(options.file, { port: options.port, token: options.token });
  const removeFile = (): void => {
    if (options.file !== undefined) removeRendezvousFile(options.file);
  };
  process.once('exit', removeFile);
  // worker.js beside this module: dist/runtime/rendezvous/worker.js, or in the bundle
  // dist/bundle/worker.js (scripts/bundle.mjs makes it an entry point of that name).
  const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: options });
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      worker.once('message', (m: HostMessage) => {
        if (m.kind === 'listening') resolve(m.port);
        else reject(new TopocollError(m.code as 'ECONFIG', m.message, { rank: 0, hint: m.hint }));
      });
      worker.once('error', (e) => reject(new TopocollError('ECONFIG', `the rendezvous server thread failed: ${e.message}`, { rank: 0, cause: e })));
      worker.once('exit', (code) => reject(new TopocollError('ECONFIG', `the rendezvous server thread exited (code ${code}) before listening`, { rank: 0 })));
    });
  } catch (e) {
    removeFile();
    await worker.terminate();
    throw e;
  }
  worker.removeAllListeners('exit');
  worker.once('exit', () => process.off('exit', removeFile));
  if (options.file !== undefined && options.port === 0) writeRendezvousFile(options.file, { port, token: options.token });
  return {
    port,
    release: () => {
      removeFile();
      worker.unref();
    },
  };
}
