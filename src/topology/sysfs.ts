import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { TopocollError } from '../errors.js';
import { formatIndexList, parseIndexList } from './index-list.js';
import type { MachineTopology, ObjectKind, TopologyObject } from './types.js';
import { readOptionalTextFile } from '../util/read-text-file.js';

/**
 * The machine as Linux sysfs describes it, for hosts without hwloc. The objects get the
 * logical numbering hwloc would give them on Linux, so locality strings computed from this
 * agree with PMIx's.
 */

const NO_SYSFS_HINT = 'Give the machine as an hwloc XML file instead (lstopo-no-graphics --of xml --no-io > machine.xml).';

/** Cache level (`cache/indexK/level`) of each kind that carries groups. */
const CACHE_KIND: Readonly<Record<string, ObjectKind>> = { '1': 'l1', '2': 'l2', '3': 'l3' };

/** Objects of one kind being collected, keyed by whatever identifies them in sysfs. */
type Collector = Map<string, { osIndex?: number; pus: Set<number> }>;

/**
 * Reads `<root>/sys/devices/system/{cpu,node}`. `root` is `/` on a live system; tests point it
 * at a fake tree. Only online CPUs are described; a machine without `node/` is one NUMA node.
 */
export function readSysfsTopology(root = '/'): MachineTopology {
  const cpuDir = join(root, 'sys/devices/system/cpu');
  const onlinePath = join(cpuDir, 'online');
  const onlineText = readOptional(onlinePath);
  if (onlineText === undefined) {
    throw new TopocollError('ETOPOLOGY', 'cannot read the online CPUs: no such file', { file: onlinePath, hint: NO_SYSFS_HINT });
  }
  const online = parseIndexList(onlineText, { file: onlinePath });
  if (online.length === 0) throw new TopocollError('ETOPOLOGY', 'no CPU is online', { file: onlinePath });
  const isOnline = new Set(online);

  const collectors: Partial<Record<ObjectKind, Collector>> = {};
  const add = (kind: ObjectKind, key: string, pus: readonly number[], osIndex: number | undefined): void => {
    const collector = (collectors[kind] ??= new Map() as Collector);
    let entry = collector.get(key);
    if (entry === undefined) {
      entry = osIndex === undefined ? { pus: new Set() } : { osIndex, pus: new Set() };
      collector.set(key, entry);
    }
    for (const pu of pus) if (isOnline.has(pu)) entry.pus.add(pu);
  };

  for (const cpu of online) {
    const dir = join(cpuDir, `cpu${cpu}`);
    add('pu', `${cpu}`, [cpu], cpu);
    const topo = join(dir, 'topology');
    const packageId = readInteger(join(topo, 'physical_package_id'));
    // -1 is what some kernels report when the package is unknown: the CPUs then share one.
    if (packageId !== undefined) add('socket', `${packageId}`, [cpu], packageId >= 0 ? packageId : undefined);
    const siblings = readList(join(topo, 'core_cpus_list')) ?? readList(join(topo, 'thread_siblings_list'));
    if (siblings !== undefined) add('core', formatIndexList(siblings), siblings, readInteger(join(topo, 'core_id')));
    for (const index of listDir(join(dir, 'cache'), /^index\d+$/)) {
      const cache = join(dir, 'cache', index);
      const kind = CACHE_KIND[readOptional(join(cache, 'level')) ?? ''];
      // L1 is the data (or unified) cache; instruction caches never form groups.
      if (kind === undefined || readOptional(join(cache, 'type')) === 'Instruction') continue;
      const shared = readList(join(cache, 'shared_cpu_list')) ?? [cpu];
      add(kind, formatIndexList(shared), shared, readInteger(join(cache, 'id')));
    }
  }

  const nodeDir = join(root, 'sys/devices/system/node');
  const nodes = listDir(nodeDir, /^node\d+$/);
  if (nodes.length === 0) {
    add('numa', '0', online, 0);
  } else {
    for (const node of nodes) {
      const cpulistPath = join(nodeDir, node, 'cpulist');
      const cpus = readList(cpulistPath);
      if (cpus === undefined) throw new TopocollError('ETOPOLOGY', 'cannot read the CPUs of a NUMA node: no such file', { file: cpulistPath });
      add('numa', node, cpus, Number(node.slice(4)));
    }
  }

  return { source: 'sysfs', pus: online, objects: numberObjects(collectors) };
}

/** CPU-side kinds from the top of hwloc's tree down: each level nests in the ones above. */
const TREE_ORDER: readonly ObjectKind[] = ['socket', 'l3', 'l2', 'l1', 'core', 'pu'];

interface Collected {
  osIndex?: number;
  pus: number[];
  /** Lowest PU of each enclosing object, top-down: the object's position in hwloc's tree. */
  path: number[];
}

/**
 * Gives every object the logical index hwloc would. hwloc inserts objects by cpuset, keeps
 * every object's children sorted by their lowest PU and numbers each level in depth-first
 * order. Ordering a level by its objects' lowest PU alone is wrong wherever numbering
 * interleaves (Intel hyper-threads: core 0 holds PUs 0 and 16, so PU 16 is logical PU 1);
 * sorting by the path of lowest PUs from the root is the depth-first order.
 */
function numberObjects(collectors: Partial<Record<ObjectKind, Collector>>): Partial<Record<ObjectKind, TopologyObject[]>> {
  const collected: Partial<Record<ObjectKind, Collected[]>> = {};
  for (const [kind, collector] of Object.entries(collectors) as [ObjectKind, Collector][]) {
    collected[kind] = [...collector.values()].map(({ osIndex, pus }) => ({
      ...(osIndex === undefined ? {} : { osIndex }),
      pus: [...pus].sort((a, b) => a - b),
      path: [],
    }));
  }
  // For each CPU-side kind, which of its objects holds each PU.
  const holder = new Map<ObjectKind, Map<number, Collected>>();
  for (const kind of TREE_ORDER) {
    const byPu = new Map<number, Collected>();
    for (const object of collected[kind] ?? []) for (const pu of object.pus) byPu.set(pu, object);
    holder.set(kind, byPu);
  }
  TREE_ORDER.forEach((kind, depth) => {
    for (const object of collected[kind] ?? []) {
      const first = object.pus[0]!;
      object.path = TREE_ORDER.slice(0, depth).map((above) => holder.get(above)!.get(first)?.pus[0] ?? -1);
      object.path.push(first);
    }
  });
  // A NUMA node is a memory child of the deepest object whose PUs include all of its own;
  // nodes without CPUs are memory children of the machine root.
  for (const node of collected.numa ?? []) {
    const first = node.pus[0];
    for (const kind of TREE_ORDER) {
      const container = first === undefined ? undefined : holder.get(kind)!.get(first);
      if (container === undefined || !node.pus.every((pu) => holder.get(kind)!.get(pu) === container)) break;
      node.path.push(container.pus[0]!);
    }
  }
  const objects: Partial<Record<ObjectKind, TopologyObject[]>> = {};
  for (const [kind, list] of Object.entries(collected) as [ObjectKind, Collected[]][]) {
    list.sort((a, b) => comparePaths(a.path, b.path) || (a.osIndex ?? 0) - (b.osIndex ?? 0));
    objects[kind] = list.map(({ osIndex, pus }, logicalIndex) => (osIndex === undefined ? { logicalIndex, pus } : { logicalIndex, osIndex, pus }));
  }
  return objects;
}

/**
 * Depth-first order of two tree positions. When one path is a prefix of the other the deeper
 * object comes first: hwloc visits an object's children before its memory children, so a NUMA
 * node attached higher up is numbered after those attached below it.
 */
function comparePaths(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return b.length - a.length;
}

/** Bytes of the largest cache of CPU 0 (`cache/indexK/size`), undefined when sysfs does not say. */
export function lastLevelCacheBytes(root = '/'): number | undefined {
  const dir = join(root, 'sys/devices/system/cpu/cpu0/cache');
  let largest: number | undefined;
  for (const index of listDir(dir, /^index\d+$/)) {
    const m = /^(\d+)([KMG]?)$/.exec(readOptional(join(dir, index, 'size')) ?? '');
    if (m === null) continue;
    const unit = m[2] === 'K' ? 1024 : m[2] === 'M' ? 1 << 20 : m[2] === 'G' ? 1 << 30 : 1;
    const bytes = Number(m[1]) * unit;
    largest = Math.max(largest ?? 0, bytes);
  }
  return largest;
}

/** The trimmed contents of a sysfs file, or undefined when it does not exist. */
function readOptional(path: string): string | undefined {
  return readOptionalTextFile(path, 'ETOPOLOGY', 'sysfs file')?.trim();
}

function readList(path: string): number[] | undefined {
  const text = readOptional(path);
  return text === undefined ? undefined : parseIndexList(text, { file: path });
}

function readInteger(path: string): number | undefined {
  const text = readOptional(path);
  if (text === undefined) return undefined;
  if (!/^-?\d{1,9}$/.test(text)) throw new TopocollError('ETOPOLOGY', `expected an integer, found "${text}"`, { file: path });
  return Number(text);
}

/** Entries of a directory whose names match, in numeric order; none if it does not exist. */
function listDir(path: string, pattern: RegExp): string[] {
  let names: string[];
  try {
    names = readdirSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new TopocollError('ETOPOLOGY', `cannot list sysfs directory: ${(e as Error).message}`, { file: path, cause: e });
  }
  const number = (name: string): number => Number(/\d+$/.exec(name)![0]);
  return names.filter((n) => pattern.test(n)).sort((a, b) => number(a) - number(b));
}
