/**
 * The plan of an emulated cluster: which hosts, which switches (one bridge each), which links,
 * which addresses and link rates. Pure: nothing here starts a process or touches the system, so
 * the plan can be checked (and shown) before any namespace exists.
 *
 * Layout: one network namespace holds every switch as a bridge; a switch with a parent is joined
 * to the parent's bridge by a veth pair (`up<k>` on its own bridge, `dn<k>` on the parent's); each
 * host's `eth0` is a veth whose other end `h<i>` is a port of its leaf switch's bridge. All hosts
 * share one IPv4 subnet (one L2 domain through the tree), so any host reaches any other as in a
 * cluster's management network.
 */
import { TopocollError } from '../errors.js';
import type { NetworkTopology } from '../topology/network/index.js';

/** One host: a set of namespaces with its own name, address and leaf switch. */
export interface PlannedHost {
  index: number;
  name: string;
  /** IPv4 address on the cluster's subnet. */
  address: string;
  /** Index in `switches` of the switch its eth0 is cabled to. */
  leaf: number;
  /** Name of its port (the other end of its eth0) in the switch namespace. */
  port: string;
}

export interface PlannedSwitch {
  index: number;
  name: string;
  /** 1 for a leaf switch, 2 for its parent, … (the file's `switch1`, `switch2`, …). */
  level: number;
  /** Index in `switches` of the parent, undefined for the top switch. */
  parent: number | undefined;
  /** Its bridge in the switch namespace. */
  bridge: string;
  /** The veth pair to the parent: `uplink` is a port of this bridge, `downlink` of the parent's. */
  uplink?: { uplink: string; downlink: string };
  /** True for the switch added to join several top switches (the file has no such switch). */
  added: boolean;
}

/** A link rate for `tc … tbf`: the text tc takes and the rate in bytes per second. */
export interface LinkRate {
  text: string;
  bytesPerSecond: number;
}

export interface ClusterPlan {
  hosts: PlannedHost[];
  switches: PlannedSwitch[];
  /** Prefix length of the subnet every address is on. */
  prefixLength: number;
  /** Rate of links by level: level 1 = host–leaf links, level L = links from a level L−1 switch up. */
  rates: Map<number, LinkRate>;
}

export interface PlanOptions {
  /** CIDR the addresses are taken from (host i gets the (i+1)-th address); default 10.99.0.0/16. */
  subnet?: string;
  /** Link rates by level (`parseRates`). */
  rates?: Map<number, LinkRate>;
}

/** Hosts one cluster may have: every host is a process and a veth pair. */
export const MAX_CLUSTER_HOSTS = 1024;
export const DEFAULT_SUBNET = '10.99.0.0/16';

/** The name of a host must be a valid host name (it is set with `hostname` and written to /etc/hosts). */
const HOST_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*$/;

/** The network of the `--leaves L --hosts H` shorthand: node0 … node(L·H−1), leaf0 … leaf(L−1), and `spine` above them. */
export function shorthandNetwork(leaves: number, hostsPerLeaf: number): NetworkTopology {
  for (const [what, n] of [
    ['--leaves', leaves],
    ['--hosts', hostsPerLeaf],
  ] as const) {
    if (!(Number.isInteger(n) && n >= 1)) throw new TopocollError('EINVAL', `${what} must be a positive integer, got ${n}`);
  }
  if (leaves * hostsPerLeaf > MAX_CLUSTER_HOSTS) {
    throw new TopocollError('EINVAL', `${leaves} leaves × ${hostsPerLeaf} hosts is more than ${MAX_CLUSTER_HOSTS} hosts`);
  }
  const nodes: NetworkTopology['nodes'] = new Map();
  for (let l = 0; l < leaves; l++) {
    for (let h = 0; h < hostsPerLeaf; h++) {
      const node = `node${l * hostsPerLeaf + h}`;
      nodes.set(node, { node, switches: [`leaf${l}`, 'spine'] });
    }
  }
  return { source: `shorthand:${leaves}x${hostsPerLeaf}`, levels: 2, nodes, warnings: [] };
}

/** `a.b.c.d/p` as a 32-bit base and prefix length; the base must have no host bits. */
export function parseSubnet(cidr: string): { base: number; prefixLength: number } {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
  const octets = m ? m.slice(1, 5).map(Number) : [];
  const prefixLength = m ? Number(m[5]) : NaN;
  if (!m || octets.some((o) => o > 255) || !(prefixLength >= 8 && prefixLength <= 30)) {
    throw new TopocollError('EINVAL', `--subnet must be an IPv4 CIDR with a prefix of 8 to 30 bits, such as ${DEFAULT_SUBNET}, got "${cidr}"`);
  }
  const base = octets.reduce((a, o) => a * 256 + o, 0);
  const hostBits = 2 ** (32 - prefixLength);
  if (base % hostBits !== 0) throw new TopocollError('EINVAL', `--subnet ${cidr} has host bits set`, { hint: 'Give the network address, e.g. 10.99.0.0/16.' });
  return { base, prefixLength };
}

function formatAddress(a: number): string {
  return [a >>> 24, (a >>> 16) & 255, (a >>> 8) & 255, a & 255].join('.');
}

const RATE_UNITS: Record<string, number> = {
  bit: 1 / 8,
  kbit: 1e3 / 8,
  mbit: 1e6 / 8,
  gbit: 1e9 / 8,
  tbit: 1e12 / 8,
  bps: 1,
  kbps: 1e3,
  mbps: 1e6,
  gbps: 1e9,
  tbps: 1e12,
};

/** Level names `--rate` takes besides `switch<N>`. */
const LEVEL_ALIASES: Record<string, number> = { leaf: 1, spine: 2 };

/**
 * `leaf=10gbit,spine=1gbit` (or `switch1=…,switch2=…`): the rate of the links at each level, in
 * tc's units (bit, kbit, mbit, gbit, tbit per second; bps, kbps, … are bytes per second).
 */
export function parseRates(text: string): Map<number, LinkRate> {
  const rates = new Map<number, LinkRate>();
  for (const item of text.split(',').filter((s) => s.trim() !== '')) {
    const m = /^\s*([A-Za-z]+\d*)\s*=\s*(\d+(?:\.\d+)?)([A-Za-z]+)\s*$/.exec(item);
    const level = m ? (LEVEL_ALIASES[m[1]!.toLowerCase()] ?? Number(/^switch(\d+)$/i.exec(m[1]!)?.[1] ?? NaN)) : NaN;
    const unit = m ? RATE_UNITS[m[3]!.toLowerCase()] : undefined;
    if (!m || !(level >= 1) || unit === undefined || !(Number(m[2]) > 0)) {
      throw new TopocollError('EINVAL', `--rate: "${item.trim()}" is not <level>=<rate>`, {
        hint: 'Levels are leaf, spine or switch<N>; rates are as tc writes them (10gbit, 500mbit, 100mbps), e.g. --rate leaf=10gbit,spine=1gbit.',
      });
    }
    if (rates.has(level)) throw new TopocollError('EINVAL', `--rate gives level switch${level} twice`);
    rates.set(level, { text: `${m[2]}${m[3]!.toLowerCase()}`, bytesPerSecond: Number(m[2]) * unit });
  }
  return rates;
}

/**
 * tbf's bucket for a rate: at least one 64 KiB segment (veths carry GSO segments that large,
 * and a bucket smaller than a packet drops it) and at least 1 ms at the rate.
 */
export function tbfBurstBytes(rate: LinkRate): number {
  return Math.max(128 * 1024, Math.ceil(rate.bytesPerSecond / 1000));
}

export function planCluster(net: NetworkTopology, opts: PlanOptions = {}): ClusterPlan {
  const { base, prefixLength } = parseSubnet(opts.subnet ?? DEFAULT_SUBNET);
  const names = [...net.nodes.keys()];
  if (names.length > MAX_CLUSTER_HOSTS)
    throw new TopocollError('ETOPOLOGY', `${net.file ?? net.source} has ${names.length} nodes; a cluster may have ${MAX_CLUSTER_HOSTS}`);
  // The network address, then one per host; the broadcast address stays free.
  if (names.length + 2 > 2 ** (32 - prefixLength)) {
    throw new TopocollError('EINVAL', `--subnet /${prefixLength} has no room for ${names.length} hosts`, { hint: 'Give a shorter prefix.' });
  }
  for (const name of names) {
    if (!HOST_NAME.test(name) || name.length > 64) {
      throw new TopocollError('ETOPOLOGY', `node name "${name}" cannot be a host name`, {
        file: net.file,
        node: name,
        hint: 'Host names are letters, digits and hyphens, at most 64 characters, dot-separated.',
      });
    }
  }

  const switches: PlannedSwitch[] = [];
  const byName = new Map<string, number>();
  const switchNamed = (name: string, level: number): number => {
    let k = byName.get(name);
    if (k === undefined) {
      k = switches.length;
      byName.set(name, k);
      switches.push({ index: k, name, level, parent: undefined, bridge: `br${k}`, added: false });
    }
    return k;
  };
  const hosts: PlannedHost[] = names.map((name, index) => {
    const path = net.nodes.get(name)!.switches;
    // A level without a switch (an unbalanced tree) is skipped: the node's next switch above is its leaf.
    const present = path.flatMap((s, i) => (s === undefined ? [] : [{ name: s, level: i + 1 }]));
    if (present.length === 0) throw new TopocollError('ETOPOLOGY', `node ${name} has no switch`, { file: net.file, node: name });
    const chain = present.map((s) => switchNamed(s.name, s.level));
    for (let i = 0; i + 1 < chain.length; i++) switches[chain[i]!]!.parent ??= chain[i + 1];
    return { index, name, address: formatAddress(base + index + 1), leaf: chain[0]!, port: `h${index}` };
  });
  const tops = switches.filter((s) => s.parent === undefined);
  if (tops.length > 1) {
    // Top switches the file leaves apart are joined under one bridge, or their hosts could not reach each other.
    const level = Math.max(...tops.map((s) => s.level)) + 1;
    const root = switches.length;
    switches.push({ index: root, name: 'root', level, parent: undefined, bridge: `br${root}`, added: true });
    for (const s of tops) s.parent = root;
  }
  for (const s of switches) if (s.parent !== undefined) s.uplink = { uplink: `up${s.index}`, downlink: `dn${s.index}` };

  const rates = opts.rates ?? new Map<number, LinkRate>();
  const deepest = Math.max(...switches.map((s) => s.level));
  for (const level of rates.keys()) {
    if (level > deepest) throw new TopocollError('EINVAL', `--rate gives level switch${level}, but the network's top switches are at level ${deepest}`);
  }
  return { hosts, switches, prefixLength, rates };
}

/** The level of the links between a switch and its parent: the parent's level. */
export function uplinkLevel(plan: ClusterPlan, s: PlannedSwitch): number {
  return s.parent === undefined ? 0 : plan.switches[s.parent]!.level;
}

/**
 * Host i's /etc/hosts: every host by its address; itself as its own address (`address`) or as
 * 127.0.1.1 the way Debian's installer writes it (`loopback`).
 */
export function etcHostsText(plan: ClusterPlan, i: number, self: 'address' | 'loopback'): string {
  const lines = ['127.0.0.1 localhost'];
  if (self === 'loopback') lines.push(`127.0.1.1 ${plan.hosts[i]!.name}`);
  for (const h of plan.hosts) if (self === 'address' || h.index !== i) lines.push(`${h.address} ${h.name}`);
  return `${lines.join('\n')}\n`;
}

/** One line per host and switch, for `cluster up`'s output. */
export function describePlan(plan: ClusterPlan): string {
  const width = Math.max(...plan.hosts.map((h) => h.name.length));
  const lines = plan.hosts.map((h) => {
    const chain: string[] = [];
    for (let s: number | undefined = h.leaf; s !== undefined; s = plan.switches[s]!.parent) chain.push(plan.switches[s]!.name);
    return `  ${h.name.padEnd(width)}  ${`${h.address}/${plan.prefixLength}`.padEnd(18)}  ${chain.join(' → ')}`;
  });
  const rates = [...plan.rates].sort(([a], [b]) => a - b).map(([level, r]) => `switch${level} links ${r.text}`);
  if (rates.length > 0) lines.push(`  rates: ${rates.join(', ')}`);
  return `${lines.join('\n')}\n`;
}
