import type { TopocollConfig } from '../../config/schema.js';
import { TopocollError } from '../../errors.js';
import { readNetworkFile } from './network-file.js';
import { parseSlurmTopologyAddress } from './slurm-address.js';
import type { NetworkTopology, NodeNetworkPath } from './types.js';

/**
 * What one process knows about the network before ranks exchange anything, chosen by the
 * `network` section of the configuration:
 * - `file`: the whole network, read from a node-to-switch file or Slurm topology.conf;
 * - `slurm`: only this node's own path, from `SLURM_TOPOLOGY_ADDR`; ranks exchange these paths
 *   and combine them with `networkFromSlurmAddresses`;
 * - `none`: no switch levels.
 * `auto` takes the file when one is set, else the Slurm address when Slurm exported one.
 */
export type LocalNetworkView = { kind: 'none' } | { kind: 'file'; network: NetworkTopology } | { kind: 'slurm'; path: NodeNetworkPath };

export function resolveNetworkSource(setting: TopocollConfig['network'], env: NodeJS.ProcessEnv, node: string): LocalNetworkView {
  const source = setting.source === 'auto' ? (setting.file !== null ? 'file' : env.SLURM_TOPOLOGY_ADDR ? 'slurm' : 'none') : setting.source;
  switch (source) {
    case 'none':
      return { kind: 'none' };
    case 'file':
      if (setting.file === null) throw new TopocollError('ECONFIG', 'network.source is "file" but network.file is not set');
      return { kind: 'file', network: readNetworkFile(setting.file) };
    case 'slurm':
      return { kind: 'slurm', path: slurmPath(env, node) };
  }
}

function slurmPath(env: NodeJS.ProcessEnv, node: string): NodeNetworkPath {
  const addr = env.SLURM_TOPOLOGY_ADDR;
  const pattern = env.SLURM_TOPOLOGY_ADDR_PATTERN;
  if (!addr || !pattern) {
    throw new TopocollError('ECONFIG', 'network.source is "slurm" but SLURM_TOPOLOGY_ADDR / SLURM_TOPOLOGY_ADDR_PATTERN are not set', {
      hint: 'Run under srun, or give a network file (network.file).',
    });
  }
  const path = parseSlurmTopologyAddress(addr, pattern);
  // The planner looks nodes up by the name ranks report; both must be Slurm's node name.
  if (path.node !== node) {
    throw new TopocollError('ECONFIG', `SLURM_TOPOLOGY_ADDR names node "${path.node}" but this process calls its node "${node}"`, {
      node,
      hint: 'Set node.identity to slurm (or auto) so nodes are named as Slurm names them.',
    });
  }
  return path;
}
