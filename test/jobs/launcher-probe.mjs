// @ts-check
// A rank of the launcher tests (no communicator): argv[2] says what to do.
//   affinity — print rank, TOPOCOLL_* variables and the CPUs this process may run on
//   fail     — rank 0 exits with code 5 at once; the others would run forever
//   sleep    — every rank runs until a signal; it prints the signal it got
import { readFileSync } from 'node:fs';

const rank = Number(process.env.TOPOCOLL_RANK);
switch (process.argv[2]) {
  case 'affinity': {
    const cpus = /** @type {RegExpExecArray} */ (/Cpus_allowed_list:\s*(\S+)/.exec(readFileSync('/proc/self/status', 'utf8')))[1];
    const e = process.env;
    console.log(
      JSON.stringify({
        rank,
        size: e.TOPOCOLL_SIZE,
        local: e.TOPOCOLL_LOCAL_RANK,
        localSize: e.TOPOCOLL_LOCAL_SIZE,
        node: e.TOPOCOLL_NODE ?? null,
        cpus,
        args: process.argv.slice(3),
        machine: e.TOPOCOLL_LSTOPO_MACHINE ?? null,
      }),
    );
    break;
  }
  case 'fail':
    if (rank === 0) process.exit(5);
    setInterval(() => {}, 1000);
    break;
  case 'sleep':
    for (const signal of ['SIGTERM', 'SIGINT']) {
      process.on(signal, () => {
        console.log(`rank ${rank} got ${signal}`);
        process.exit(0);
      });
    }
    console.log(`rank ${rank} ready`);
    setInterval(() => {}, 1000);
    break;
}
