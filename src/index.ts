/**
 * topocoll — topology-aware collectives for Node.js processes. Public surface only: everything
 * exported here is supported API; modules not re-exported are internal.
 */
export { TopocollError, isTopocollError } from './errors.js';
export type { TopocollErrorCode, ErrorLocation } from './errors.js';
export * from './topology/types.js';
export type { NetworkTopology, NodeNetworkPath } from './topology/network/types.js';
