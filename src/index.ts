/**
 * topocoll — topology-aware collectives for Node.js processes. Public surface only: everything
 * exported here is supported API; modules not re-exported are internal.
 *
 * @module topocoll
 */
export { TopocollError, isTopocollError } from './errors.js';
export type { TopocollErrorCode, ErrorLocation, TopocollErrorOptions } from './errors.js';

// Topology model and sources.
export * from './topology/types.js';
export { parseLocality, formatLocality, localityIndices } from './topology/locality-string.js';
export { parseIndexList, formatIndexList, parseHwlocCpuset } from './topology/index-list.js';
export { parseHwlocXml, readHwlocXmlFile } from './topology/hwloc-xml.js';
export { readSysfsTopology } from './topology/sysfs.js';
export { discoverMachine, type DiscoverOptions } from './topology/discover.js';
export { readProcessAffinity, parseAffinityFromStatus } from './topology/affinity.js';
export { computeLocality } from './topology/process-locality.js';
export { placeRanks, type PlacementOptions, type MapBy, type BindTo } from './topology/rank-mapping.js';
export { parseLocalitiesFile, formatLocalitiesFile, readLocalitiesFile } from './topology/localities-file.js';
export { resolveNodeIdentity } from './topology/node-identity.js';

// Network.
export {
  expandHostlist,
  compressHostlist,
  parseNetworkFile,
  readNetworkFile,
  parseSimpleNetworkFile,
  parseSlurmTopologyConf,
  parseSlurmTopologyAddress,
  networkFromSlurmAddresses,
  pathForNode,
  resolveNetworkSource,
} from './topology/network/index.js';
export type { NetworkTopology, NodeNetworkPath, SourceLine, LocalNetworkView } from './topology/network/index.js';

// Groups.
export { planGroups, GroupPlan, type Group, type PlanOptions, type DroppedLevel } from './groups/plan.js';
export { planToJson, type GroupPlanJson } from './groups/plan-json.js';
export type { LevelName } from './groups/levels.js';

// Runtime.
export { init, type InitOptions } from './init.js';
export { createCommunicator, type CreateCommunicatorOptions } from './p2p/create-communicator.js';
export type { PointToPoint, NativePointToPoint } from './p2p/point-to-point.js';
export { Communicator, IN_PLACE, type InPlace, type LevelInfo, type Operator } from './communicator.js';
export type { SharedMemoryReport } from './runtime/shm-budget.js';
export type { CollectiveRequest } from './runtime/request.js';
export { ANY_SOURCE, ANY_TAG, type MessageRequest, type MessageStatus, type ObjectMessage } from './p2p/messages.js';
export { userOp, type UserOp, type ReduceOpName } from './runtime/datatypes.js';
export type { TypedArray } from './util/typed-array.js';
export type { TypedArrayClass } from './runtime/windows.js';
export type { PlacementReport } from './runtime/numa-residency.js';
export type { Explanation, Candidate, SizeRun } from './algorithms/selection.js';
export type { Route, PathName } from './runtime/router.js';
export type { LinkModel } from './algorithms/cost-model.js';

// Configuration.
export { parseConfig, loadConfigFile, resolveConfig, validateConfig, DEFAULT_CONFIG_PATH } from './config/load.js';
export type { TopocollConfig, TopocollConfigInput } from './config/schema.js';
export type { RuntimeConfigInput } from './config/load.js';
