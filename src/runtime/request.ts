import type { NativeEngine, NativeJob } from '../native.js';

/**
 * A non-blocking collective in flight (MPI's request), made by a communicator's `i*` methods.
 * The collective runs on the communicator's progress thread, in call order with every other
 * collective of that communicator. `test()` says whether it has completed (MPI_Test), `wait()`
 * blocks the calling thread until it has (MPI_Wait), `await request` waits without blocking the
 * event loop. A collective that failed throws its `TopocollError` from each of the three.
 * Until it has completed, the buffers it was given belong to it (the request keeps them alive).
 *
 * Its end is known on the JavaScript thread two ways, whichever comes first: the addon's record
 * of the job (`test()`, `wait()`), or its Promise settling (`await`, `then`).
 */
export class CollectiveRequest implements PromiseLike<void> {
  /** Undefined while the collective runs; then whether it failed and why. */
  private outcome?: { failed: boolean; error?: unknown };
  private readonly settled: Promise<void>;

  /**
   * @internal made by Communicator. `job` undefined: the collective already ran on the calling
   * thread. `completed` is called once, when this request's end is first known.
   */
  constructor(
    private readonly engine: NativeEngine,
    private readonly job: NativeJob | undefined,
    private readonly completed: () => void,
    keepAlive: readonly unknown[],
  ) {
    if (job === undefined) {
      this.settled = Promise.resolve();
      this.end(false, undefined);
      return;
    }
    this.settled = job.done.then(
      () => {
        this.end(false, undefined);
        return void keepAlive;
      },
      (e: unknown) => {
        this.end(true, e);
        throw e;
      },
    );
    // A request nobody awaits must not end the process as an unhandled rejection: its error is
    // what test() and wait() throw.
    this.settled.catch(() => undefined);
  }

  /** Whether the collective has completed (MPI_Test); throws its error if it failed. Never blocks. */
  test(): boolean {
    if (this.outcome === undefined && !this.learn(() => this.engine.testJob(this.job!.id))) return false;
    return this.result();
  }

  /**
   * Blocks until the collective has completed (MPI_Wait); throws its error if it failed. Like a
   * Sync collective it holds the event loop, and it is refused (EINVAL) where those are: on a
   * communicator whose nodes are linked by a JavaScript layer.
   */
  wait(): void {
    if (this.outcome === undefined) {
      this.engine.ensureBlocking();
      this.learn(() => {
        this.engine.waitJob(this.job!.id);
        return true;
      });
    }
    this.result();
  }

  then<A = void, B = never>(
    onfulfilled?: ((value: void) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.settled.then(onfulfilled, onrejected);
  }

  /**
   * Asks the addon whether the job has ended (`ask` returns false while it runs, throws its
   * error if it failed) and records the outcome; false: still running.
   */
  private learn(ask: () => boolean): boolean {
    try {
      if (!ask()) return false;
      this.end(false, undefined);
    } catch (e) {
      this.end(true, e);
    }
    return true;
  }

  private end(failed: boolean, error: unknown): void {
    if (this.outcome !== undefined) return;
    this.outcome = { failed, error };
    this.completed();
  }

  private result(): true {
    if (this.outcome!.failed) throw this.outcome!.error;
    return true;
  }
}
