/** Polling: setImmediate for the first polls (a completion that is about to come), then 1 ms timers. */
const IMMEDIATE_POLLS = 100;

/**
 * Resolves with the first value `test` gives other than undefined, polling it from the event
 * loop; rejects with what `test` throws. `stopped()` true ends the polling with that rejection
 * reason instead (its check comes before each poll).
 */
export function pollUntilDone<T>(test: () => T | undefined, stopped?: () => Error | undefined): Promise<T> {
  return new Promise((resolve, reject) => {
    let polls = 0;
    const poll = (): void => {
      let r: T | undefined;
      try {
        const stop = stopped?.();
        if (stop !== undefined) throw stop;
        r = test();
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      if (r !== undefined) {
        resolve(r);
        return;
      }
      if (++polls < IMMEDIATE_POLLS) setImmediate(poll);
      else setTimeout(poll, 1);
    };
    poll();
  });
}
