/**
 * The simple network file: one line per node (or hostlist of nodes) followed by its switches
 * bottom-up, the format of the S3 paper (`node01 sw11`) extended with parent switches so that
 * leaf and spine levels can both be described without Slurm:
 *
 *     # node        leaf   spine
 *     node[01-16]   sw11   sw21
 *
 * `#` starts a comment anywhere on a line; blank lines are ignored.
 */
import { TopocollError, type ErrorLocation } from '../../errors.js';
import { lines } from '../../util/lines.js';
import { excerpt } from '../../util/quote.js';
import { expandHostlist, HostlistBudget } from './hostlist.js';
import { MAX_SWITCH_LEVELS, SwitchTreeChecker, padToLevels } from './switch-tree.js';
import type { NetworkTopology, NodeNetworkPath } from './types.js';

const FORMAT_HINT = 'Each line is: <node or hostlist> <leaf switch> [<parent switch> …].';

/** A line, checked; its hostlist is expanded once the whole file is known to be within limits. */
interface Declaration {
  nodes: string;
  switches: string[];
  line: number;
  at: ErrorLocation;
}

export function parseSimpleNetworkFile(text: string, file: string): NetworkTopology {
  const checker = new SwitchTreeChecker();
  const budget = new HostlistBudget();
  const declarations: Declaration[] = [];
  for (const [raw, line] of lines(text, file)) {
    const hash = raw.indexOf('#');
    const fields: { text: string; column: number }[] = [];
    for (const m of (hash >= 0 ? raw.slice(0, hash) : raw).matchAll(/\S+/g)) {
      // One field more than a path may have is enough for the checker to refuse the line.
      if (fields.length > MAX_SWITCH_LEVELS + 1) break;
      fields.push({ text: m[0], column: m.index + 1 });
    }
    const [nodeField, ...switchFields] = fields;
    if (nodeField === undefined) continue;
    const at = { file, line, column: nodeField.column };
    if (nodeField.text.includes('=')) {
      throw new TopocollError('ETOPOLOGY', `'${excerpt(nodeField.text)}' is not a node name`, {
        ...at,
        hint: 'Key=value lines belong to Slurm topology.conf, which is recognised by SwitchName= statements; otherwise ' + FORMAT_HINT,
      });
    }
    if (switchFields.length === 0) {
      throw new TopocollError('ETOPOLOGY', `node ${excerpt(nodeField.text)} has no switch`, { ...at, hint: FORMAT_HINT });
    }
    for (const f of switchFields) {
      if (/[[\],]/.test(f.text)) {
        throw new TopocollError('ETOPOLOGY', `switch '${excerpt(f.text)}' must be a single name, not a hostlist`, {
          file,
          line,
          column: f.column,
          hint: 'Only the node field may be a hostlist; list one switch per level, leaf first.',
        });
      }
    }
    const switches = switchFields.map((f) => f.text);
    checker.check(switches, { label: `on line ${line}`, where: { file, line } });
    budget.take(nodeField.text, at);
    declarations.push({ nodes: nodeField.text, switches, line, at });
  }
  const nodes = new Map<string, NodeNetworkPath>();
  for (const { nodes: hostlist, switches, line, at } of declarations) {
    for (const node of expandHostlist(hostlist, at)) {
      const earlier = nodes.get(node);
      if (earlier !== undefined) {
        const first = earlier.declaredAt?.line === line ? 'earlier on the same line' : `on line ${earlier.declaredAt?.line}`;
        throw new TopocollError('ETOPOLOGY', `node ${node} is declared twice: ${first} and on line ${line}`, {
          ...at,
          node,
          hint: 'A node sits under one leaf switch: keep one of the two declarations.',
        });
      }
      nodes.set(node, { node, switches: [...switches], declaredAt: { file, line } });
    }
  }
  if (nodes.size === 0) {
    throw new TopocollError('ETOPOLOGY', 'network file declares no nodes', { file, line: 1, hint: FORMAT_HINT });
  }
  return { source: `simple:${file}`, file, levels: padToLevels(nodes.values()), nodes, warnings: [] };
}
