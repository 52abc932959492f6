/**
 * Slurm's `topology.conf` for the tree plugin (and `scontrol show topology` output, which adds
 * `Level=`), read the way `src/common/parse_config.c` and `switch_record.c` read it, so that a
 * site's existing file describes the same network to topocoll as to Slurm:
 *
 *     SwitchName=s0 Nodes=tux[0-3]
 *     SwitchName=s4 Switches=s[0-3] LinkSpeed=1800
 *
 * Slurm tolerates some inconsistencies with a log line (a node under two leaves); we refuse them,
 * because the collectives would silently group that node twice.
 */
import { TopocollError, type ErrorLocation } from '../../errors.js';
import { lines } from '../../util/lines.js';
import { excerpt } from '../../util/quote.js';
import { compressHostlist, expandHostlist, HostlistBudget } from './hostlist.js';
import { checkSwitchName, MAX_SWITCH_LEVELS, MAX_SWITCHES } from './switch-tree.js';
import type { NetworkTopology, NodeNetworkPath } from './types.js';

const KEYS = ['switchname', 'nodes', 'switches', 'linkspeed', 'level'] as const;
type Key = (typeof KEYS)[number];
const KEYS_HINT = 'A tree topology.conf statement is SwitchName=<name> Nodes=<hostlist> | Switches=<hostlist> [LinkSpeed=<n>] [Level=<n>].';

/**
 * Physical lines one statement may be continued over (trailing `\`): every line is remembered to
 * locate errors, and a Switches= list of thousands of names fits on far fewer lines.
 */
const MAX_STATEMENT_LINES = 1 << 16;

/** A physical line's contribution to a (possibly continued) statement. */
interface Segment {
  offset: number;
  line: number;
}

/** One logical line: physical lines joined at trailing backslashes. */
interface Statement {
  text: string;
  segments: Segment[];
}

interface Pair {
  key: Key;
  value: string;
  at: ErrorLocation;
}

/** A list-valued field and where it was written; `names` is filled once the whole file is read. */
interface ListField {
  hostlist: string;
  names: string[];
  at: ErrorLocation;
}

interface SwitchDef {
  name: string;
  /** Where the statement starts. */
  line: number;
  nodes?: ListField;
  children?: ListField;
}

export function parseSlurmTopologyConf(text: string, file: string): NetworkTopology {
  const defs = new Map<string, SwitchDef>();
  const budget = new HostlistBudget();
  for (const statement of readStatements(text, file)) {
    const def = toSwitchDef(statement, file, budget);
    const earlier = defs.get(def.name);
    if (earlier !== undefined) {
      throw new TopocollError('ETOPOLOGY', `switch ${def.name} is defined twice: on line ${earlier.line} and on line ${def.line}`, {
        file,
        line: def.line,
        hint: 'Switch names must be unique; merge the two statements or rename one.',
      });
    }
    if (defs.size === MAX_SWITCHES) {
      throw new TopocollError('ETOPOLOGY', `switch ${def.name} takes the file past ${MAX_SWITCHES} switches, the limit for one network`, {
        file,
        line: def.line,
        hint: 'Check the file: a network of a million nodes has a few thousand switches.',
      });
    }
    defs.set(def.name, def);
  }
  // Expanded only now that every hostlist of the file is known to fit the budget.
  for (const def of defs.values()) {
    for (const field of [def.nodes, def.children]) if (field !== undefined) field.names = expandHostlist(field.hostlist, field.at);
    if (def.children !== undefined) def.children.names = [...new Set(def.children.names)];
  }

  const warnings: string[] = [];
  const parents = chooseParents(defs, warnings);
  const levels = computeLevels(defs, file);
  const levelCount = [...levels.values()].reduce((max, l) => Math.max(max, l + 1), 0);

  const nodes = new Map<string, NodeNetworkPath>();
  const leafOf = new Map<string, SwitchDef>();
  for (const def of defs.values()) {
    if (def.nodes === undefined) continue;
    for (const node of new Set(def.nodes.names)) {
      const other = leafOf.get(node);
      if (other !== undefined) {
        throw new TopocollError(
          'ETOPOLOGY',
          `node ${node} is in leaf switch ${other.name} (line ${other.line}) and in leaf switch ${def.name} (line ${def.line})`,
          { ...def.nodes.at, node, hint: 'A node must sit under exactly one leaf switch: remove it from one Nodes= list.' },
        );
      }
      leafOf.set(node, def);
      const switches: (string | undefined)[] = new Array<string | undefined>(levelCount).fill(undefined);
      for (let s: string | undefined = def.name; s !== undefined; s = parents.get(s)) switches[levels.get(s) ?? 0] = s;
      nodes.set(node, { node, switches, declaredAt: { file, line: def.line } });
    }
  }
  if (nodes.size === 0) {
    throw new TopocollError('ETOPOLOGY', 'topology.conf declares no nodes', { file, line: 1, hint: 'Give the leaf switches Nodes=<hostlist>.' });
  }
  return { source: `slurm-topology.conf:${file}`, file, levels: levelCount, nodes, warnings };
}

/**
 * Splits the text into statements, one at a time: `#` starts a comment unless written `\#`, and
 * an odd number of trailing backslashes joins the next line (Slurm joins without inserting a
 * space). Each statement remembers which physical line every part came from, so that an error in
 * a continued statement points at the line where the offending pair is written.
 */
function* readStatements(text: string, file: string): Generator<Statement> {
  let pending: Statement | undefined;
  for (const [raw, line] of lines(text, file)) {
    const content = stripComment(raw).trimEnd();
    const continued = trailingBackslashes(content) % 2 === 1;
    const statement = pending ?? { text: '', segments: [] };
    if (statement.segments.length === MAX_STATEMENT_LINES) {
      throw new TopocollError('ETOPOLOGY', `a statement continues over more than ${MAX_STATEMENT_LINES} lines`, {
        file,
        line: statement.segments[0]?.line,
        hint: 'Check for stray backslashes at the ends of lines.',
      });
    }
    statement.segments.push({ offset: statement.text.length, line });
    statement.text += continued ? content.slice(0, -1) : content;
    pending = continued ? statement : undefined;
    if (!continued && statement.text.trim() !== '') yield statement;
  }
  if (pending !== undefined && pending.text.trim() !== '') yield pending;
}

function trailingBackslashes(text: string): number {
  let n = 0;
  while (n < text.length && text.charCodeAt(text.length - 1 - n) === 0x5c) n++;
  return n;
}

function stripComment(line: string): string {
  for (let i = line.indexOf('#'); i >= 0; i = line.indexOf('#', i + 1)) {
    if (i === 0 || line[i - 1] !== '\\') return line.slice(0, i);
  }
  return line;
}

/** File, line and column of a character of a statement. */
function locate(statement: Statement, offset: number, file: string): ErrorLocation {
  let segment = statement.segments[0] as Segment;
  for (const s of statement.segments) if (s.offset <= offset) segment = s;
  return { file, line: segment.line, column: offset - segment.offset + 1 };
}

/** Key=value pairs per Slurm's `^\s*([[:alnum:]_.]+)\s*=\s*("([^"]*)"|[^\s]+)(\s|$)`. */
function readPairs(statement: Statement, file: string): Pair[] {
  const text = statement.text;
  const pairs: Pair[] = [];
  const seen = new Map<Key, ErrorLocation>();
  const keyPattern = /([A-Za-z0-9_.]+)\s*=(\s*)/y;
  let pos = 0;
  for (;;) {
    while (pos < text.length && /\s/.test(text[pos] as string)) pos++;
    if (pos >= text.length) return pairs;
    const at = locate(statement, pos, file);
    keyPattern.lastIndex = pos;
    const m = keyPattern.exec(text);
    if (m === null) {
      const word = /\S*/.exec(text.slice(pos))?.[0];
      throw new TopocollError('ETOPOLOGY', `expected Key=Value, found '${excerpt(word ?? '')}'`, { ...at, hint: KEYS_HINT });
    }
    const keyText = m[1] as string;
    const key = keyText.toLowerCase() as Key;
    if (!KEYS.includes(key)) {
      throw new TopocollError('ETOPOLOGY', `unknown key ${excerpt(keyText)}=`, {
        ...at,
        hint: `${KEYS_HINT} Block and ring topologies (BlockName=, RingName=) are not supported.`,
      });
    }
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      throw new TopocollError('ETOPOLOGY', `${keyText}= is given twice in one statement (first at column ${earlier.column})`, {
        ...at,
        hint: 'Give each key once per SwitchName= statement.',
      });
    }
    seen.set(key, at);
    pos = keyPattern.lastIndex;
    let value: string;
    if (text[pos] === '"') {
      const close = text.indexOf('"', pos + 1);
      if (close < 0) throw new TopocollError('ETOPOLOGY', `${keyText}= has an unterminated quoted value`, { ...at, hint: 'Close the quote.' });
      value = text.slice(pos + 1, close);
      pos = close + 1;
      if (pos < text.length && !/\s/.test(text[pos] as string)) {
        throw new TopocollError('ETOPOLOGY', `${keyText}= has text right after its closing quote`, { ...at, hint: 'Separate pairs with a space.' });
      }
    } else {
      value = /\S*/y.exec(text.slice(pos))?.[0] ?? '';
      pos += value.length;
      if (value === '' || ((m[2] as string) !== '' && value.includes('='))) {
        throw new TopocollError('ETOPOLOGY', `${keyText}= has no value`, { ...at, hint: 'Write the value right after =, or quote an empty one ("").' });
      }
    }
    pairs.push({ key, value: value.replace(/\\#/g, '#'), at });
  }
}

function toSwitchDef(statement: Statement, file: string, budget: HostlistBudget): SwitchDef {
  const pairs = readPairs(statement, file);
  const start = locate(statement, statement.text.search(/\S/), file);
  const byKey = new Map(pairs.map((p) => [p.key, p]));
  const name = byKey.get('switchname');
  if (name === undefined) {
    throw new TopocollError('ETOPOLOGY', 'statement has no SwitchName=', { ...start, hint: KEYS_HINT });
  }
  if (name.value === '') throw new TopocollError('ETOPOLOGY', 'SwitchName= is empty', { ...name.at, hint: 'Give the switch a name.' });
  checkSwitchName(name.value, name.at);
  const nodes = byKey.get('nodes');
  const children = byKey.get('switches');
  if (nodes !== undefined && children !== undefined) {
    throw new TopocollError('ETOPOLOGY', `switch ${name.value} has both Nodes= and Switches=`, {
      ...children.at,
      hint: 'A switch is either a leaf (Nodes=) or a parent (Switches=); put the nodes under a separate leaf switch.',
    });
  }
  const def: SwitchDef = { name: name.value, line: start.line as number };
  for (const [key, pair] of [
    ['nodes', nodes],
    ['children', children],
  ] as const) {
    if (pair === undefined) continue;
    budget.take(pair.value, pair.at);
    def[key] = { hostlist: pair.value, names: [], at: pair.at };
  }
  return def;
}

/**
 * A child listed under several parents (a fat tree: every leaf under every spine) gets the
 * lexicographically first parent for its path, so that every rank computes the same tree; the
 * other parents are reported as a warning. Also checks that every child is defined.
 */
function chooseParents(defs: Map<string, SwitchDef>, warnings: string[]): Map<string, string> {
  const parentsOf = new Map<string, string[]>();
  for (const def of defs.values()) {
    for (const child of def.children?.names ?? []) {
      if (!defs.has(child)) {
        throw new TopocollError('ETOPOLOGY', `switch ${def.name} lists child switch ${child}, which is never defined`, {
          ...def.children?.at,
          hint: `Add a SwitchName=${child} statement or remove ${child} from Switches=.`,
        });
      }
      const parents = parentsOf.get(child);
      if (parents === undefined) parentsOf.set(child, [def.name]);
      else parents.push(def.name);
    }
  }
  const chosen = new Map<string, string>();
  for (const [child, parents] of parentsOf) {
    const first = [...parents].sort()[0] as string;
    chosen.set(child, first);
    if (parents.length > 1) {
      warnings.push(
        `switch ${child} (line ${defs.get(child)?.line}) has ${parents.length} parents ${compressHostlist(parents)}; node paths go through ${first}`,
      );
    }
  }
  return chosen;
}

/**
 * Level 0 for a leaf, 1 + the highest child level for a parent; refuses cycles and levels beyond
 * MAX_SWITCH_LEVELS. Depth-first with an explicit stack: a chain of switches may be as long as
 * the file allows.
 */
function computeLevels(defs: Map<string, SwitchDef>, file: string): Map<string, number> {
  const levels = new Map<string, number>();
  const onStack = new Set<string>();
  const childrenOf = (name: string): string[] => defs.get(name)?.children?.names ?? [];
  for (const root of defs.keys()) {
    if (levels.has(root)) continue;
    const stack: { name: string; next: number }[] = [{ name: root, next: 0 }];
    onStack.add(root);
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as { name: string; next: number };
      const children = childrenOf(top.name);
      const child = children[top.next++];
      if (child !== undefined) {
        if (levels.has(child)) continue;
        if (onStack.has(child))
          throw cycleError(
            defs,
            stack.map((e) => e.name),
            child,
          );
        // The switch at the bottom of the stack is at least as many levels up as the stack is deep.
        if (stack.length === MAX_SWITCH_LEVELS) throw tooDeep(defs, stack[0]!.name, file);
        stack.push({ name: child, next: 0 });
        onStack.add(child);
        continue;
      }
      let level = 0;
      for (const c of children) level = Math.max(level, (levels.get(c) as number) + 1);
      if (level >= MAX_SWITCH_LEVELS) throw tooDeep(defs, top.name, file);
      levels.set(top.name, level);
      onStack.delete(top.name);
      stack.pop();
    }
  }
  return levels;
}

function cycleError(defs: Map<string, SwitchDef>, stack: string[], name: string): TopocollError {
  const cycle = [...stack.slice(stack.indexOf(name)), name];
  const path = cycle.map((s, i) => (i < cycle.length - 1 ? `${s} (line ${defs.get(s)?.line})` : s)).join(' -> ');
  return new TopocollError('ETOPOLOGY', `switches form a cycle: ${path}`, {
    ...defs.get(name)?.children?.at,
    hint: 'Switches= lists a switch’s children; a switch cannot be its own ancestor.',
  });
}

function tooDeep(defs: Map<string, SwitchDef>, name: string, file: string): TopocollError {
  return new TopocollError('ETOPOLOGY', `switch ${name} is more than ${MAX_SWITCH_LEVELS} levels above its nodes, the limit for one network`, {
    file,
    line: defs.get(name)?.line,
    hint: 'Check the Switches= lists for a chain that should be a tree: fabrics have a handful of levels.',
  });
}
