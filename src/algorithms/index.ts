export { binomialTree, binomialSubtreeSize, type BinomialNode } from './binomial-tree.js';
export { knomialTree, knomialSubtreeSize, type KnomialNode } from './knomial-tree.js';
export {
  StepKind,
  STEP_WORDS,
  WHOLE,
  RANK_BLOCKS,
  rankBlock,
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
  type AllgatherAlgorithm,
  type AllreduceAlgorithm,
  type GroupAllgatherAlgorithm,
  type GroupBarrierAlgorithm,
  type CombiningTreeChoice,
  type BcastAlgorithm,
  type ReduceAlgorithm,
  type GroupAlgorithm,
  type KnomialChoice,
} from './algorithm-choice.js';
export { groupBcastSteps, type GroupBcastOptions } from './group-bcast.js';
export { groupReduceSteps, type GroupReduceOptions } from './group-reduce.js';
export { groupAllreduceSteps } from './group-allreduce.js';
export { groupAllgatherSteps, groupAllgatherRounds, averageLogicalDistance, allgatherAlcd } from './group-allgather.js';
export { groupBarrierSteps, groupBarrierArriveSteps, groupBarrierReleaseSteps, arriveInformsAll, type GroupBarrierSteps } from './group-barrier.js';
export type { GroupView } from './group-steps.js';
export {
  bcastSchedule,
  reduceSchedule,
  allreduceSchedules,
  allgatherSchedules,
  barrierSchedules,
  coveredBelow,
  coveringSources,
  topGroup,
  reductionOrder,
  preservesRankOrder,
  ScheduleCache,
  GLOBAL_LEADER,
  type AllgatherOptions,
  type AllgatherSchedules,
  type AllreduceOptions,
  type AllreduceSchedules,
  type AllreduceVariant,
  type BarrierOptions,
  type BarrierSchedules,
  type BcastOptions,
  type ReduceOptions,
  type ReduceVariant,
  type ScheduleCacheOptions,
} from './hierarchical.js';
export {
  predictBarrierUs,
  chooseBarrier,
  DEFAULT_BARRIER_CANDIDATES,
  type LogP,
  type BarrierPrediction,
  type BarrierChoice,
} from './barrier-model.js';
