/** Where compute nodes sit in the network: parsers for every supported network source. */
export type { NetworkTopology, NodeNetworkPath, SourceLine } from './types.js';
export { expandHostlist, compressHostlist } from './hostlist.js';
export { parseSimpleNetworkFile } from './simple-file.js';
export { parseSlurmTopologyConf } from './slurm-topology-conf.js';
export { parseSlurmTopologyAddress, networkFromSlurmAddresses } from './slurm-address.js';
export { parseNetworkFile, readNetworkFile, pathForNode } from './network-file.js';
export { resolveNetworkSource, type LocalNetworkView } from './network-source.js';
