export { binomialTree, binomialSubtreeSize, type BinomialNode } from './binomial-tree.js';
export { StepKind, STEP_WORDS, encodeSchedule, decodeSteps, type Step, type Schedule, type CollectiveKind } from './schedule.js';
export {
  bcastSchedule,
  reduceSchedule,
  allreduceSchedules,
  coveringSources,
  ScheduleCache,
  GLOBAL_LEADER,
} from './hierarchical.js';
