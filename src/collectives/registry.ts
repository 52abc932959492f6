import { allgather, allgatherv } from './allgather.js';
import { allreduce } from './allreduce.js';
import { barrier } from './barrier.js';
import { bcast } from './bcast.js';
import { reduce } from './reduce.js';

/** Every collective a communicator offers, each declared once (its own module); the communicator's three forms of each come from these. */
export const collectives = { bcast, reduce, allreduce, allgather, allgatherv, barrier } as const;

/** The collectives explain() and the router answer for (allgatherv runs as allgather does). */
export const explainedCollectives = ['bcast', 'reduce', 'allreduce', 'allgather', 'barrier'] as const;
export type ExplainedCollective = (typeof explainedCollectives)[number];
