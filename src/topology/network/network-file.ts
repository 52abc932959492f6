/**
 * The user's network file, in either supported format. The format is recognised from the content,
 * not the file name, because sites name their copies of `topology.conf` freely and a simple file
 * can have any extension.
 */
import { TopocollError, type ErrorLocation } from '../../errors.js';
import { compressHostlist } from './hostlist.js';
import { parseSimpleNetworkFile } from './simple-file.js';
import { parseSlurmTopologyConf } from './slurm-topology-conf.js';
import type { NetworkTopology, NodeNetworkPath } from './types.js';
import { readTextFile } from '../../util/read-text-file.js';
import { lines } from '../../util/lines.js';

/** Slurm topology.conf when any statement starts with `SwitchName=` (any case), else simple. */
export function parseNetworkFile(text: string, file: string): NetworkTopology {
  let isSlurm = false;
  for (const [line] of lines(text, file)) if ((isSlurm = /^\s*switchname\s*=/i.test(line))) break;
  return isSlurm ? parseSlurmTopologyConf(text, file) : parseSimpleNetworkFile(text, file);
}

export function readNetworkFile(path: string): NetworkTopology {
  const hint = 'Check the path given to --network (or network.file in the configuration) and its permissions.';
  return parseNetworkFile(readTextFile(path, 'ETOPOLOGY', 'network file', hint), path);
}

/** A hint shows every known node when they compress to this many characters, else a few. */
const HINT_NODES_CHARS = 120;
const HINT_FEW_NODES = 8;

/**
 * The path of one node. A node missing from the description is nearly always a naming mismatch
 * (FQDN against short name, hostname against SLURMD_NODENAME), so the hint shows the names the
 * description does use.
 */
export function pathForNode(net: NetworkTopology, node: string, where: ErrorLocation = {}): NodeNetworkPath {
  const path = net.nodes.get(node);
  if (path !== undefined) return path;
  const names = [...net.nodes.keys()];
  const all = compressHostlist(names);
  const shown = all.length <= HINT_NODES_CHARS ? all : `${compressHostlist(names.slice(0, HINT_FEW_NODES))} and ${names.length - HINT_FEW_NODES} more`;
  const similar = names.find((n) => n.split('.')[0] === node.split('.')[0]);
  const suggestion = similar === undefined ? '' : ` Did you mean ${similar}?`;
  throw new TopocollError('ETOPOLOGY', `node ${node} is not in ${net.file ?? net.source}`, {
    ...where,
    file: net.file ?? where.file,
    node,
    hint: `It knows ${shown}.${suggestion} Add the node, or change which name identifies a node (host name, short name, SLURMD_NODENAME).`,
  });
}
