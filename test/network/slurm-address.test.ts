import { describe, expect, it } from 'vitest';
import { compressHostlist, expandHostlist } from '../../src/topology/network/hostlist.js';
import { networkFromSlurmAddresses, parseSlurmTopologyAddress } from '../../src/topology/network/slurm-address.js';
import { parseSlurmTopologyConf } from '../../src/topology/network/slurm-topology-conf.js';
import type { NodeNetworkPath } from '../../src/topology/network/types.js';
import { thrown } from '../helpers/thrown.js';
import { BINARY_TREE_CONF, UNBALANCED_CONF, exampleFile } from '../helpers/network-examples.js';

describe('parseSlurmTopologyAddress', () => {
  it('reads a tree address top-down into a bottom-up path', () => {
    expect(parseSlurmTopologyAddress('s5.s1.tux2', 'switch.switch.node')).toEqual({ node: 'tux2', switches: ['s1', 's5'] });
    expect(parseSlurmTopologyAddress('s6.s4.s1.tux2', 'switch.switch.switch.node')).toEqual({ node: 'tux2', switches: ['s1', 's4', 's6'] });
  });

  it('keeps the dots of an FQDN node name', () => {
    expect(parseSlurmTopologyAddress('s4.s1.tux2.cluster.example.org', 'switch.switch.node')).toEqual({
      node: 'tux2.cluster.example.org',
      switches: ['s1', 's4'],
    });
    expect(parseSlurmTopologyAddress('tux2.example.org', 'node')).toEqual({ node: 'tux2.example.org', switches: [] });
  });

  it('takes the lexicographically first switch of a hostlist component (fat tree)', () => {
    expect(parseSlurmTopologyAddress('s[4-7].s1.tux5', 'switch.switch.node')).toEqual({ node: 'tux5', switches: ['s1', 's4'] });
    expect(parseSlurmTopologyAddress('sp[9-10].l1.n1', 'switch.switch.node').switches).toEqual(['l1', 'sp10']);
  });

  it('reads an empty component as no switch at that level (unbalanced tree)', () => {
    expect(parseSlurmTopologyAddress('top..s0.a0', 'switch.switch.switch.node')).toEqual({ node: 'a0', switches: ['s0', undefined, 'top'] });
  });

  it('reads the flat and block patterns', () => {
    expect(parseSlurmTopologyAddress('tux2', 'node')).toEqual({ node: 'tux2', switches: [] });
    expect(parseSlurmTopologyAddress('b8.tux1', 'block.node')).toEqual({ node: 'tux1', switches: ['b8'] });
  });

  it('rejects ring and torus patterns with EINVAL', () => {
    for (const [addr, pattern] of [
      ['r8:2.tux1', 'ring:position.node'],
      ['pod1:2:3:1.tux1', 'torus:x:y:z.node'],
    ] as const) {
      const e = thrown(() => parseSlurmTopologyAddress(addr, pattern));
      expect(e.code).toBe('EINVAL');
      expect(e.message).toContain(pattern);
      expect(e.message).toContain('only the tree');
      expect(e.message).toContain('block');
      expect(e.message).toContain('flat');
    }
  });

  it('rejects a pattern that does not end with node, or has an unknown component', () => {
    expect(thrown(() => parseSlurmTopologyAddress('a.b', 'switch.switch')).code).toBe('EINVAL');
    expect(thrown(() => parseSlurmTopologyAddress('', '')).code).toBe('EINVAL');
    const e = thrown(() => parseSlurmTopologyAddress('x.n1', 'rack.node'));
    expect(e.code).toBe('EINVAL');
    expect(e.message).toContain("'rack' (unknown)");
  });

  it('rejects an address with fewer components than its pattern', () => {
    const e = thrown(() => parseSlurmTopologyAddress('s1.tux2', 'switch.switch.node'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain("SLURM_TOPOLOGY_ADDR 's1.tux2' has 2 components but its pattern has 3");
  });

  it('does not split inside brackets', () => {
    const e = thrown(() => parseSlurmTopologyAddress('s[4.5].tux2', 'switch.switch.node'));
    expect(e.message).toContain('has 2 components');
  });

  it('rejects an empty node name and a malformed switch hostlist', () => {
    expect(thrown(() => parseSlurmTopologyAddress('s1.', 'switch.node')).message).toContain('no node name');
    const e = thrown(() => parseSlurmTopologyAddress('s[7-4].tux1', 'switch.node'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain("SLURM_TOPOLOGY_ADDR 's[7-4].tux1'");
    expect(e.node).toBe('tux1');
    expect(thrown(() => parseSlurmTopologyAddress(',.tux1', 'switch.node')).message).toContain('with no name');
  });
});

describe('networkFromSlurmAddresses', () => {
  const path = (addr: string, pattern = 'switch.switch.node') => parseSlurmTopologyAddress(addr, pattern);

  it('combines the paths of all ranks, several per node', () => {
    const net = networkFromSlurmAddresses([path('s4.s0.tux0'), path('s4.s0.tux0'), path('s4.s1.tux5'), path('s4.s0.tux1')]);
    expect(net.source).toBe('slurm-addr');
    expect(net.file).toBeUndefined();
    expect(net.levels).toBe(2);
    expect([...net.nodes.keys()]).toEqual(['tux0', 'tux5', 'tux1']);
    expect(net.nodes.get('tux5')).toEqual({ node: 'tux5', switches: ['s1', 's4'] });
  });

  it('pads shorter paths at the top', () => {
    const net = networkFromSlurmAddresses([path('l1.n1', 'switch.node'), path('top.l2.n2')]);
    expect(net.levels).toBe(2);
    expect(net.nodes.get('n1')?.switches).toEqual(['l1', undefined]);
  });

  it('returns an empty network for no paths', () => {
    expect(networkFromSlurmAddresses([]).levels).toBe(0);
  });

  it('rejects two different addresses for one node', () => {
    const e = thrown(() => networkFromSlurmAddresses([path('s4.s0.tux0'), path('s4.s1.tux0')]));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('node tux0 reported two different addresses: s4.s0.tux0 and s4.s1.tux0');
  });

  it('rejects a switch under two parents, naming both nodes', () => {
    const e = thrown(() => networkFromSlurmAddresses([path('s4.s0.tux0'), path('s5.s0.tux1')]));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('switch s0 has parent s5 for node tux1 but parent s4 for node tux0');
    expect(e.node).toBe('tux1');
  });

  it('rejects a switch at two levels, naming both nodes', () => {
    const e = thrown(() => networkFromSlurmAddresses([path('s4.s0.tux0'), path('s0.s1.tux1')]));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('switch s0 is at level switch2 for node tux1 but at level switch1 for node tux0');
  });
});

/**
 * Independent cross-check: the addresses are computed here the way slurmd computes them
 * (`topology_p_get_node_addr`: for each level from the top, every switch of that level whose node
 * set holds the node, as a ranged hostlist), from definitions read with a one-line regex; parsing
 * them must give the same path as parsing the topology.conf.
 */
interface Def {
  name: string;
  nodes?: string[];
  children?: string[];
}

function defsOf(conf: string): Def[] {
  const defs: Def[] = [];
  for (const line of conf.split('\n')) {
    const m = /^SwitchName=(\S+)\s+(Nodes|Switches)=(\S+)/.exec(line);
    if (m === null) continue;
    const names = expandHostlist(m[3] as string);
    defs.push(m[2] === 'Nodes' ? { name: m[1] as string, nodes: names } : { name: m[1] as string, children: names });
  }
  return defs;
}

function slurmAddresses(conf: string): { addr: string; pattern: string; node: string }[] {
  const defs = new Map(defsOf(conf).map((d) => [d.name, d]));
  const level = (name: string): number => {
    const children = defs.get(name)?.children;
    return children === undefined ? 0 : 1 + Math.max(...children.map(level));
  };
  const nodeSet = (name: string): string[] => {
    const d = defs.get(name) as Def;
    return d.nodes ?? (d.children ?? []).flatMap(nodeSet);
  };
  const top = Math.max(...[...defs.keys()].map(level));
  const allNodes = [...defs.values()].flatMap((d) => d.nodes ?? []);
  return allNodes.map((node) => {
    let addr = '';
    for (let j = top; j >= 0; j--) {
      const here = [...defs.keys()].filter((s) => level(s) === j && nodeSet(s).includes(node));
      addr += `${compressHostlist(here)}.`;
    }
    return { addr: addr + node, pattern: `${'switch.'.repeat(top + 1)}node`, node };
  });
}

describe('topology.conf and SLURM_TOPOLOGY_ADDR agree', () => {
  const examples: [string, string][] = [
    ['Topology Guide example (config/examples/topology.conf)', exampleFile('topology.conf')],
    ['fat tree (config/examples/topology-fat-tree.conf)', exampleFile('topology-fat-tree.conf')],
    ['binary tree', BINARY_TREE_CONF],
    ['unbalanced tree', UNBALANCED_CONF],
    [
      'three-level fat tree with pods',
      [
        'SwitchName=l1 Nodes=n[01-04]',
        'SwitchName=l2 Nodes=n[05-08]',
        'SwitchName=l3 Nodes=n[09-12]',
        'SwitchName=l4 Nodes=n[13-16]',
        'SwitchName=a1 Switches=l[1-2]',
        'SwitchName=a2 Switches=l[1-2]',
        'SwitchName=a3 Switches=l[3-4]',
        'SwitchName=a4 Switches=l[3-4]',
        'SwitchName=c1 Switches=a[1-4]',
        'SwitchName=c2 Switches=a[1-4]',
      ].join('\n'),
    ],
  ];

  it('computes the addresses the reference derives', () => {
    const find = (conf: string, node: string) => slurmAddresses(conf).find((a) => a.node === node);
    expect(find(BINARY_TREE_CONF, 'tux2')).toEqual({ addr: 's6.s4.s1.tux2', pattern: 'switch.switch.switch.node', node: 'tux2' });
    expect(find(exampleFile('topology-fat-tree.conf'), 'tux5')?.addr).toBe('s[4-7].s1.tux5');
    expect(find(UNBALANCED_CONF, 'a0')).toEqual({ addr: 'top..s0.a0', pattern: 'switch.switch.switch.node', node: 'a0' });
  });

  for (const [name, conf] of examples) {
    it(`gives every node the same path: ${name}`, () => {
      const fromConf = parseSlurmTopologyConf(conf, 'topology.conf');
      const addresses = slurmAddresses(conf);
      expect(addresses.length).toBe(fromConf.nodes.size);
      const paths: NodeNetworkPath[] = addresses.map(({ addr, pattern }) => parseSlurmTopologyAddress(addr, pattern));
      for (const p of paths) expect(p.switches, p.node).toEqual(fromConf.nodes.get(p.node)?.switches);
      const fromAddr = networkFromSlurmAddresses(paths);
      expect(fromAddr.levels).toBe(fromConf.levels);
      expect(new Map([...fromAddr.nodes].map(([n, p]) => [n, p.switches]))).toEqual(new Map([...fromConf.nodes].map(([n, p]) => [n, p.switches])));
    });
  }
});
