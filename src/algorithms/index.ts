export { binomialTree, binomialSubtreeSize, type BinomialNode } from './binomial-tree.js';
export { knomialTree, knomialSubtreeSize, type KnomialNode } from './knomial-tree.js';
export {
  StepKind,
  STEP_WORDS,
  WHOLE,
  encodeSchedule,
  decodeSteps,
  blockElements,
  hasExchanges,
  type BlockRange,
  type Step,
  type Schedule,
  type CollectiveKind,
} from './schedule.js';
export {
  parseAlgorithm,
  formatAlgorithm,
  type AllreduceAlgorithm,
  type BcastAlgorithm,
  type ReduceAlgorithm,
  type GroupAlgorithm,
  type KnomialChoice,
} from './algorithm-choice.js';
export { groupBcastSteps, type GroupBcastOptions } from './group-bcast.js';
export { groupReduceSteps, type GroupReduceOptions } from './group-reduce.js';
export { groupAllreduceSteps } from './group-allreduce.js';
export type { GroupView } from './group-steps.js';
export {
  bcastSchedule,
  reduceSchedule,
  allreduceSchedules,
  coveringSources,
  topGroup,
  reductionOrder,
  preservesRankOrder,
  ScheduleCache,
  GLOBAL_LEADER,
  type AllreduceOptions,
  type AllreduceSchedules,
  type AllreduceVariant,
  type BcastOptions,
  type ReduceOptions,
  type ReduceVariant,
  type ScheduleCacheOptions,
} from './hierarchical.js';
