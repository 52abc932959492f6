/**
 * `SLURM_TOPOLOGY_ADDR` / `SLURM_TOPOLOGY_ADDR_PATTERN`, which slurmstepd exports to every task:
 * under Slurm each process learns its own leaf and spine switches without any file, and the
 * ranks exchange these paths to build the whole network.
 *
 * The tree plugin writes, for each level from the top down, the ranged hostlist of every switch
 * of that level whose subtree holds the node (`topology_tree.c: topology_p_get_node_addr`):
 * `s6.s4.s1.tux2` / `switch.switch.switch.node`, `s[4-7].s1.tux5` in a fat tree, and an empty
 * component where an unbalanced tree skips a level (`top..s0.a0`).
 */
import { TopocollError, isTopocollError } from '../../errors.js';
import { expandHostlist } from './hostlist.js';
import { SwitchTreeChecker, padToLevels } from './switch-tree.js';
import type { NetworkTopology, NodeNetworkPath } from './types.js';

const SUPPORTED = 'only the tree (switch.….node), block (block.node) and flat (node) topology plugins are supported';

export function parseSlurmTopologyAddress(addr: string, pattern: string): NodeNetworkPath {
  const kinds = pattern.split('.');
  if (kinds[kinds.length - 1] !== 'node') {
    throw new TopocollError('EINVAL', `SLURM_TOPOLOGY_ADDR_PATTERN '${pattern}' does not end with 'node'`, {
      hint: `Pass the variable exactly as Slurm sets it; ${SUPPORTED}.`,
    });
  }
  for (const kind of kinds.slice(0, -1)) {
    if (kind === 'switch' || kind === 'block') continue;
    const plugin = /^(ring|torus)\b/.test(kind) ? `from a ${kind.split(':')[0]} topology` : 'unknown';
    throw new TopocollError('EINVAL', `SLURM_TOPOLOGY_ADDR_PATTERN '${pattern}' has component '${kind}' (${plugin}); ${SUPPORTED}`, {
      hint: 'Describe the network with a network file (simple or topology.conf) instead.',
    });
  }

  const parts = splitAddress(addr, kinds.length - 1);
  const node = parts.pop() as string;
  if (node === '') {
    throw new TopocollError('ETOPOLOGY', `SLURM_TOPOLOGY_ADDR '${addr}' has no node name for pattern '${pattern}'`, {
      hint: 'The address must end with the node name.',
    });
  }
  // The address is top-down; paths are bottom-up.
  const switches = parts.reverse().map((component) => pickSwitch(component, addr, node));
  return { node, switches };
}

/**
 * Splits on the first `count` dots outside brackets (a hostlist component may be `s[4-7]`); the
 * rest is the node name, which may itself contain dots (an FQDN).
 */
function splitAddress(addr: string, count: number): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < addr.length && parts.length < count; i++) {
    const ch = addr[i];
    if (ch === '[') depth++;
    else if (ch === ']') depth--;
    else if (ch === '.' && depth === 0) {
      parts.push(addr.slice(start, i));
      start = i + 1;
    }
  }
  if (parts.length < count) {
    throw new TopocollError('ETOPOLOGY', `SLURM_TOPOLOGY_ADDR '${addr}' has ${parts.length + 1} components but its pattern has ${count + 1}`, {
      hint: 'Pass SLURM_TOPOLOGY_ADDR and SLURM_TOPOLOGY_ADDR_PATTERN from the same environment.',
    });
  }
  parts.push(addr.slice(start));
  return parts;
}

/**
 * An empty component means no switch at that level. A hostlist means several switches of the
 * level hold the node (a fat tree); every rank takes the lexicographically first, as the
 * topology.conf reader does, so both sources give the same path.
 */
function pickSwitch(component: string, addr: string, node: string): string | undefined {
  if (component === '') return undefined;
  let names: string[];
  try {
    names = expandHostlist(component);
  } catch (e) {
    if (!isTopocollError(e)) throw e;
    throw new TopocollError('ETOPOLOGY', `SLURM_TOPOLOGY_ADDR '${addr}': ${e.detail}`, { node, hint: e.hint, cause: e });
  }
  const first = names.sort()[0];
  if (first === undefined) {
    throw new TopocollError('ETOPOLOGY', `SLURM_TOPOLOGY_ADDR '${addr}' has a switch component '${component}' with no name`, { node });
  }
  return first;
}

/**
 * Combines the paths every rank parsed from its own environment into one network. Several ranks
 * of one node report the same path; different paths for one node, or paths that do not form a
 * tree, mean the ranks did not see the same Slurm configuration.
 */
export function networkFromSlurmAddresses(paths: NodeNetworkPath[]): NetworkTopology {
  const nodes = new Map<string, NodeNetworkPath>();
  const checker = new SwitchTreeChecker();
  for (const p of paths) {
    const known = nodes.get(p.node);
    if (known !== undefined) {
      if (formatAddress(known) !== formatAddress(p)) {
        throw new TopocollError('ETOPOLOGY', `node ${p.node} reported two different addresses: ${formatAddress(known)} and ${formatAddress(p)}`, {
          node: p.node,
          hint: 'All ranks of a node must run under the same Slurm topology; check that they belong to one job step.',
        });
      }
      continue;
    }
    checker.check(p.switches, { label: `for node ${p.node}`, where: { node: p.node } });
    nodes.set(p.node, { node: p.node, switches: [...p.switches] });
  }
  return { source: 'slurm-addr', levels: padToLevels(nodes.values()), nodes, warnings: [] };
}

/** A path written back as Slurm would print it (top-down, dot-separated), for messages. */
function formatAddress(p: NodeNetworkPath): string {
  return [...p.switches]
    .reverse()
    .map((s) => s ?? '')
    .concat(p.node)
    .join('.');
}
