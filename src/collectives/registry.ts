import { allgather, allgatherv } from './allgather.js';
import { allreduce } from './allreduce.js';
import { alltoall, alltoallv } from './alltoall.js';
import { barrier } from './barrier.js';
import { bcast } from './bcast.js';
import { gather, gatherv } from './gather.js';
import { reduce } from './reduce.js';
import { reduceScatter, reduceScatterBlock } from './reduce-scatter.js';
import { scatter, scatterv } from './scatter.js';
import { exscan, scan } from './scan.js';

/** Every collective a communicator offers, each declared once (its own module); the communicator's three forms of each come from these. */
export const collectives = {
  bcast,
  reduce,
  allreduce,
  allgather,
  allgatherv,
  gather,
  gatherv,
  scatter,
  scatterv,
  reduceScatterBlock,
  reduceScatter,
  scan,
  exscan,
  alltoall,
  alltoallv,
  barrier,
} as const;

/**
 * The collectives explain() and the router answer for (the v forms run as their collective does;
 * reduceScatterBlock and reduceScatter are `reduce-scatter`).
 */
export const explainedCollectives = [
  'bcast',
  'reduce',
  'allreduce',
  'allgather',
  'gather',
  'scatter',
  'reduce-scatter',
  'scan',
  'exscan',
  'alltoall',
  'barrier',
] as const;
export type ExplainedCollective = (typeof explainedCollectives)[number];
