import { describe, expect, it } from 'vitest';
import { parseSlurmTopologyConf } from '../../src/topology/network/slurm-topology-conf.js';
import { thrown } from '../helpers/thrown.js';
import { BINARY_TREE_CONF, UNBALANCED_CONF, exampleFile } from '../helpers/network-examples.js';

const parse = (text: string) => parseSlurmTopologyConf(text, 'topology.conf');
const switchesOf = (text: string, node: string) => parse(text).nodes.get(node)?.switches;

describe('parseSlurmTopologyConf', () => {
  it("reads the Topology Guide's example: four leaves under s4", () => {
    const net = parse(exampleFile('topology.conf'));
    expect(net.source).toBe('slurm-topology.conf:topology.conf');
    expect(net.file).toBe('topology.conf');
    expect(net.levels).toBe(2);
    expect(net.nodes.size).toBe(16);
    expect(net.warnings).toEqual([]);
    expect(net.nodes.get('tux0')?.switches).toEqual(['s0', 's4']);
    expect(net.nodes.get('tux5')).toEqual({ node: 'tux5', switches: ['s1', 's4'], declaredAt: { file: 'topology.conf', line: 9 } });
    expect(net.nodes.get('tux15')?.switches).toEqual(['s3', 's4']);
  });

  it('reads the binary tree: tux2 is under s1, s4 and s6', () => {
    const net = parse(BINARY_TREE_CONF);
    expect(net.levels).toBe(3);
    expect(net.nodes.get('tux2')?.switches).toEqual(['s1', 's4', 's6']);
    expect(net.nodes.get('tux5')?.switches).toEqual(['s2', 's5', 's6']);
  });

  it('reads the fat tree: the first parent s4 is used and the others are reported', () => {
    const net = parse(exampleFile('topology-fat-tree.conf'));
    expect(net.levels).toBe(2);
    expect(net.nodes.get('tux5')?.switches).toEqual(['s1', 's4']);
    expect(net.warnings).toHaveLength(4);
    expect(net.warnings[1]).toBe('switch s1 (line 7) has 4 parents s[4-7]; node paths go through s4');
  });

  it('chooses the lexicographically first parent whatever the definition order', () => {
    const net = parse('SwitchName=zz Switches=l\nSwitchName=aa Switches=l\nSwitchName=l Nodes=n1\n');
    expect(net.nodes.get('n1')?.switches).toEqual(['l', 'aa']);
    expect(net.warnings).toEqual(['switch l (line 3) has 2 parents zz,aa; node paths go through aa']);
  });

  it('places each switch at its level, leaving a skipped level undefined', () => {
    const net = parse(UNBALANCED_CONF);
    expect(net.levels).toBe(3);
    expect(net.nodes.get('a0')?.switches).toEqual(['s0', undefined, 'top']);
    expect(net.nodes.get('b1')?.switches).toEqual(['s1', 's2', 'top']);
  });

  it('reads a single leaf switch as one level', () => {
    const net = parse('SwitchName=only Nodes=n[1-3]');
    expect(net.levels).toBe(1);
    expect(net.nodes.get('n3')?.switches).toEqual(['only']);
  });

  it('accepts keys in any case', () => {
    const net = parse('switchname=s0 NODES=tux[0-1]\nSWITCHNAME=s1 nodes=tux[2-3]\nSwitchname=top sWiTcHeS=s[0-1]\n');
    expect(net.nodes.get('tux3')?.switches).toEqual(['s1', 'top']);
  });

  it('accepts double-quoted values, with spaces inside and around =', () => {
    const net = parse('SwitchName="s0" Nodes="tux0, tux[2-3]"\nSwitchName = top Switches= "s0"\n');
    expect([...net.nodes.keys()]).toEqual(['tux0', 'tux2', 'tux3']);
    expect(net.nodes.get('tux0')?.switches).toEqual(['s0', 'top']);
  });

  it('joins lines ending with a backslash and reports the first line of the statement', () => {
    const text = '# leaves\nSwitchName=s0 \\\n  Nodes=tux[0-1]\nSwitchName=s1 Nodes=tux[2-3],\\\ntux[4-5]\nSwitchName=top \\\n\\\nSwitches=s[0-1]\n';
    const net = parse(text);
    expect(net.nodes.get('tux0')).toEqual({ node: 'tux0', switches: ['s0', 'top'], declaredAt: { file: 'topology.conf', line: 2 } });
    expect(net.nodes.get('tux5')?.switches).toEqual(['s1', 'top']);
    expect(net.nodes.get('tux5')?.declaredAt?.line).toBe(4);
  });

  it('points at the physical line of a bad pair inside a continued statement', () => {
    const e = thrown(() => parse('SwitchName=s0 \\\n  Nodes=tux[3-1]\n'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('topology.conf:2:3');
    expect(e.message).toContain('"tux[3-1]"');
  });

  it('treats # as a comment unless written \\#', () => {
    const net = parse('SwitchName=s\\#0 Nodes=n1 # LinkSpeed=oops Bogus=1\n#SwitchName=s9 Nodes=n9\n');
    expect(net.nodes.get('n1')?.switches).toEqual(['s#0']);
    expect(net.nodes.has('n9')).toBe(false);
  });

  it('accepts and ignores LinkSpeed= and the Level= of scontrol show topology', () => {
    const text = [
      'SwitchName=s0 Level=0 LinkSpeed=1 Nodes=tux[0-3]',
      'SwitchName=s1 Level=0 LinkSpeed=1 Nodes=tux[4-7]',
      'SwitchName=s4 Level=1 LinkSpeed=1 Switches=s[0-1]',
    ].join('\n');
    expect(switchesOf(text, 'tux7')).toEqual(['s1', 's4']);
  });

  it('accepts a switch with neither Nodes nor Switches as an empty leaf', () => {
    const net = parse('SwitchName=spare\nSwitchName=s0 Nodes=n1\nSwitchName=top Switches=s0,spare\n');
    expect(net.levels).toBe(2);
    expect(net.nodes.get('n1')?.switches).toEqual(['s0', 'top']);
  });

  describe('errors name the file and line', () => {
    const cases: [string, string, string, string][] = [
      ['unknown key', 'SwitchName=s0 Nodes=n1\nBlockName=b1 Nodes=n[1-4]\n', 'topology.conf:2:1', 'unknown key BlockName='],
      ['misspelled key', 'SwitchName=s0 Node=n1\n', 'topology.conf:1:15', 'unknown key Node='],
      ['no SwitchName', 'SwitchName=s0 Nodes=n1\n\n  Nodes=n2 LinkSpeed=3\n', 'topology.conf:3:3', 'statement has no SwitchName='],
      ['empty SwitchName', 'SwitchName="" Nodes=n1\n', 'topology.conf:1:1', 'SwitchName= is empty'],
      ['Nodes and Switches', 'SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n2 Switches=s0\n', 'topology.conf:2:24', 'switch s1 has both Nodes= and Switches='],
      ['duplicate SwitchName', 'SwitchName=s0 Nodes=n1\n#\nswitchname=s0 Nodes=n2\n', 'topology.conf:3', 'switch s0 is defined twice: on line 1 and on line 3'],
      [
        'undefined child',
        'SwitchName=s0 Nodes=n1\nSwitchName=top Switches=s[0-1]\n',
        'topology.conf:2:16',
        'switch top lists child switch s1, which is never defined',
      ],
      [
        'two-switch cycle',
        'SwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s1\n',
        'topology.conf:1:15',
        'switches form a cycle: s1 (line 1) -> s2 (line 2) -> s1',
      ],
      ['self cycle', 'SwitchName=leaf Nodes=n1\nSwitchName=s1 Switches=s1,leaf\n', 'topology.conf:2:15', 'switches form a cycle: s1 (line 2) -> s1'],
      [
        'three-switch cycle below a root',
        'SwitchName=root Switches=a\nSwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n',
        'topology.conf:2:14',
        'switches form a cycle: a (line 2) -> b (line 3) -> c (line 4) -> a',
      ],
      [
        'node under two leaves',
        'SwitchName=s0 Nodes=tux[0-3]\nSwitchName=s1 Nodes=tux[3-5]\n',
        'topology.conf:2:15',
        'node tux3 is in leaf switch s0 (line 1) and in leaf switch s1 (line 2)',
      ],
      ['missing value', 'SwitchName=s0 Nodes=\n', 'topology.conf:1:15', 'Nodes= has no value'],
      ['value swallowed by the next key', 'SwitchName=s0 Nodes= LinkSpeed=5\n', 'topology.conf:1:15', 'Nodes= has no value'],
      ['unterminated quote', 'SwitchName=s0 Nodes="tux[0-3]\n', 'topology.conf:1:15', 'unterminated quoted value'],
      ['text after a quote', 'SwitchName="s0"x Nodes=n1\n', 'topology.conf:1:1', 'text right after its closing quote'],
      ['not key=value', 'SwitchName=s0 Nodes=n1\nSwitchName s1 Nodes=n2\n', 'topology.conf:2:1', "expected Key=Value, found 'SwitchName'"],
      ['key twice', 'SwitchName=s0 Nodes=n1 nodes=n2\n', 'topology.conf:1:24', 'nodes= is given twice in one statement (first at column 15)'],
      ['bad hostlist', 'SwitchName=s0 Nodes=tux[0-3\n', 'topology.conf:1:15', 'hostlist "tux[0-3"'],
      ['no nodes', '# nothing\nSwitchName=s0\n', 'topology.conf:1', 'declares no nodes'],
    ];
    for (const [what, text, where, detail] of cases) {
      it(what, () => {
        const e = thrown(() => parse(text));
        expect(e.code).toBe('ETOPOLOGY');
        expect(e.message).toContain(`${where}: `);
        expect(e.message).toContain(detail);
        expect(e.hint).toBeTruthy();
      });
    }
  });
});
