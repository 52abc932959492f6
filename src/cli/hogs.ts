import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Busy processes beside a benchmark (`topocoll bench --hogs N`): each spins on the CPU for as
 * long as it lives, unbound, so the kernel scheduler shares the cores between them and the ranks
 * as it would with another user's job. They are killed when the benchmark ends, and with this
 * process if it dies first (each one watches its parent through its stdin pipe).
 */
export interface Hogs {
  readonly count: number;
  stop(): void;
}

// Spins in slices of ~10 ms and exits once its stdin closes, which happens when the benchmark's
// process ends however it ends.
const HOG_SCRIPT = `
process.stdin.on('end', () => process.exit(0)).on('error', () => process.exit(0)).resume();
const spin = () => { const until = Date.now() + 10; while (Date.now() < until); setImmediate(spin); };
spin();
`;

export function startHogs(count: number): Hogs {
  const children: ChildProcess[] = [];
  for (let i = 0; i < count; i++) {
    const child = spawn(process.execPath, ['-e', HOG_SCRIPT], { stdio: ['pipe', 'ignore', 'ignore'] });
    child.unref();
    (child.stdin as { unref?: () => void } | null)?.unref?.();
    children.push(child);
  }
  const stop = () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      child.stdin?.destroy();
    }
  };
  process.once('exit', stop);
  return {
    count,
    stop() {
      stop();
      process.removeListener('exit', stop);
    },
  };
}
