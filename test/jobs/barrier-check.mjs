// @ts-check
// A rank of the barrier test: in each of ROUNDS rounds every rank waits a different time, writes
// "r:k" to a file all ranks of the job share (argv[2], O_APPEND), and enters the barrier; after
// it, every rank reads the file and must find every rank's line of round k — no rank may leave
// a barrier before every rank has entered it. Sync and Promise barriers alternate. Prints
// `rank R ok N` or throws.
//
// `--cases=FILE` (after the shared file): the rounds once per case of FILE (JSON:
// [{ config? }]), each under its configuration (configure(); none: the one in force), with a
// shared file of its own (argv[2].K for case K); after case K every rank prints
// `rank R case K ok ROUNDS` or `rank R case K failed: <what>` (a failed round does not stop the
// rounds: every rank keeps calling the same barriers), rank 0 `barriers of rank 0 case K: …`,
// and at the end `rank R ok N` (N rounds in all) or throws.
import { appendFileSync, readFileSync } from 'node:fs';
import { init } from 'topocoll';

/** @import { RuntimeConfigInput } from 'topocoll' */

const file = /** @type {string} */ (process.argv[2]);
const casesFile = process.argv
  .slice(3)
  .find((a) => a.startsWith('--cases='))
  ?.slice('--cases='.length);
/** @type {{ config?: RuntimeConfigInput }[] | undefined} */
const cases = casesFile === undefined ? undefined : JSON.parse(readFileSync(casesFile, 'utf8'));
const ROUNDS = 20;
const comm = await init();
const { rank, size } = comm;
const sleep = (/** @type {number} */ ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** The levels' barrier algorithms in force, `level:algorithm …`. */
const barriers = () =>
  comm
    .levels()
    .filter((l) => l.algorithms)
    .map((l) => `${l.name}:${/** @type {NonNullable<typeof l.algorithms>} */ (l.algorithms).barrier}`)
    .join(' ');

/**
 * ROUNDS barriers, their entries written to `shared`.
 * @param {string} shared
 * @returns {Promise<string | undefined>} the first round a rank left early, if any
 */
async function rounds(shared) {
  /** @type {string | undefined} */
  let failure;
  for (let k = 0; k < ROUNDS; k++) {
    // A different rank is last each round.
    sleep(((rank + k) % size) * 3);
    appendFileSync(shared, `${rank}:${k}\n`);
    if (k % 2 === 0) comm.barrierSync();
    else await comm.barrier();
    const seen = new Set(
      readFileSync(shared, 'utf8')
        .split('\n')
        .filter((l) => l.endsWith(`:${k}`)),
    );
    if (seen.size !== size) failure ??= `rank ${rank} left barrier ${k} having seen ${seen.size} of ${size} ranks enter it`;
  }
  return failure;
}

if (cases === undefined) {
  const failure = await rounds(file);
  if (failure !== undefined) throw new Error(failure);
  if (rank === 0) console.log(`barriers of rank 0: ${barriers()}`);
  console.log(`rank ${rank} ok ${ROUNDS}`);
} else {
  /** @type {string[]} */
  const failed = [];
  for (const [c, { config }] of cases.entries()) {
    if (config !== undefined) comm.configure(config);
    const failure = await rounds(`${file}.${c}`);
    if (rank === 0) console.log(`barriers of rank 0 case ${c}: ${barriers()}`);
    console.log(failure === undefined ? `rank ${rank} case ${c} ok ${ROUNDS}` : `rank ${rank} case ${c} failed: ${failure}`);
    if (failure !== undefined) failed.push(`case ${c}: ${failure}`);
  }
  if (failed.length > 0) throw new Error(failed.join('; '));
  console.log(`rank ${rank} ok ${ROUNDS * cases.length}`);
}
comm.close();
