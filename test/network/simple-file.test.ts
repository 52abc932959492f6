import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseSimpleNetworkFile } from '../../src/topology/network/simple-file.js';
import { thrown } from '../helpers/thrown.js';

const EXAMPLE = new URL('../../config/examples/network-simple.txt', import.meta.url);

describe('parseSimpleNetworkFile', () => {
  it('reads the paper example: 64 nodes, 16 per leaf sw11…sw14, all under spine sw21', () => {
    const net = parseSimpleNetworkFile(readFileSync(EXAMPLE, 'utf8'), 'network-simple.txt');
    expect(net.source).toBe('simple:network-simple.txt');
    expect(net.file).toBe('network-simple.txt');
    expect(net.levels).toBe(2);
    expect(net.nodes.size).toBe(64);
    expect(net.warnings).toEqual([]);
    expect(net.nodes.get('node01')?.switches).toEqual(['sw11', 'sw21']);
    expect(net.nodes.get('node16')?.switches).toEqual(['sw11', 'sw21']);
    expect(net.nodes.get('node17')?.switches).toEqual(['sw12', 'sw21']);
    expect(net.nodes.get('node64')?.switches).toEqual(['sw14', 'sw21']);
    expect(net.nodes.get('node64')?.declaredAt?.file).toBe('network-simple.txt');
    expect([...net.nodes.keys()][0]).toBe('node01');
  });

  it("reads the paper's one-switch lines as a single level", () => {
    const net = parseSimpleNetworkFile('# <node-name> <switch-name>\nnode01 sw11\nnode02 sw11\nnode17 sw12\n', 'f');
    expect(net.levels).toBe(1);
    expect(net.nodes.get('node17')).toEqual({ node: 'node17', switches: ['sw12'], declaredAt: { file: 'f', line: 4 } });
  });

  it('ignores comments, blank lines, tabs and CRLF line ends', () => {
    const text = '# header\r\n\r\n   \r\nn1\tsw1  spine # trailing comment\r\nn2 sw1 spine#x\r\n#n3 sw9\r\n';
    const net = parseSimpleNetworkFile(text, 'f');
    expect([...net.nodes.keys()]).toEqual(['n1', 'n2']);
    expect(net.nodes.get('n2')?.switches).toEqual(['sw1', 'spine']);
    expect(net.nodes.get('n2')?.declaredAt?.line).toBe(5);
  });

  it('expands a hostlist node field, commas included', () => {
    const net = parseSimpleNetworkFile('n[1-2],gpu[01-02] leaf top\n', 'f');
    expect([...net.nodes.keys()]).toEqual(['n1', 'n2', 'gpu01', 'gpu02']);
  });

  it('pads a shorter (unbalanced) path at the top with undefined', () => {
    const net = parseSimpleNetworkFile('a1 leafA\nb1 leafB mid top\nc1 leafC mid2\n', 'f');
    expect(net.levels).toBe(3);
    expect(net.nodes.get('a1')?.switches).toEqual(['leafA', undefined, undefined]);
    expect(net.nodes.get('b1')?.switches).toEqual(['leafB', 'mid', 'top']);
    expect(net.nodes.get('c1')?.switches).toEqual(['leafC', 'mid2', undefined]);
  });

  it('rejects a node without a switch', () => {
    const e = thrown(() => parseSimpleNetworkFile('n1 sw1\nn2\n', 'net.txt'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt:2:1');
    expect(e.message).toContain('node n2 has no switch');
  });

  it('rejects a node declared twice, naming both lines', () => {
    const e = thrown(() => parseSimpleNetworkFile('n[1-4] sw1\n\nn3 sw2\n', 'net.txt'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt:3');
    expect(e.message).toContain('node n3 is declared twice: on line 1 and on line 3');
    expect(e.node).toBe('n3');
  });

  it('rejects a node repeated within one hostlist', () => {
    const e = thrown(() => parseSimpleNetworkFile('n[1-2],n1 sw1\n', 'net.txt'));
    expect(e.message).toContain('net.txt:1');
    expect(e.message).toContain('earlier on the same line');
  });

  it('rejects a switch used at two levels, naming both lines', () => {
    const e = thrown(() => parseSimpleNetworkFile('n1 sw1 top\nn2 sw2 sw1\n', 'net.txt'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt:2');
    expect(e.message).toContain('switch sw1 is at level switch2 on line 2 but at level switch1 on line 1');
  });

  it('rejects a switch repeated on one line', () => {
    const e = thrown(() => parseSimpleNetworkFile('n1 sw1 sw1\n', 'net.txt'));
    expect(e.message).toContain('net.txt:1');
    expect(e.message).toContain('switch sw1 is at level switch2 on line 1 but at level switch1 on line 1');
  });

  it('rejects a leaf under two different spines, naming both lines', () => {
    const e = thrown(() => parseSimpleNetworkFile('n1 sw11 spine1\n# x\nn2 sw11 spine2\n', 'net.txt'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt:3');
    expect(e.message).toContain('switch sw11 has parent spine2 on line 3 but parent spine1 on line 1');
    expect(e.message).toContain('must be a tree');
  });

  it('rejects a switch that is a top switch on one line and has a parent on another', () => {
    const e = thrown(() => parseSimpleNetworkFile('n1 sw11\nn2 sw11 spine1\n', 'net.txt'));
    expect(e.message).toContain('net.txt:2');
    expect(e.message).toContain('switch sw11 has parent spine1 on line 2 but no parent (top switch) on line 1');
  });

  it('rejects a hostlist in a switch field', () => {
    const e = thrown(() => parseSimpleNetworkFile('n1 sw[1-2]\n', 'net.txt'));
    expect(e.message).toContain('net.txt:1:4');
    expect(e.message).toContain('single name');
  });

  it('rejects key=value lines, pointing at the Slurm format', () => {
    const e = thrown(() => parseSimpleNetworkFile('BlockName=b1 Nodes=n[1-4]\n', 'net.txt'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt:1:1');
    expect(e.hint).toContain('SwitchName=');
  });

  it('reports a bad node hostlist with file, line and column', () => {
    const e = thrown(() => parseSimpleNetworkFile('n1 sw1\n  n[3-1] sw1\n', 'net.txt'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt:2:3');
    expect(e.message).toContain('"n[3-1]"');
  });

  it('rejects a file without nodes', () => {
    const e = thrown(() => parseSimpleNetworkFile('# only comments\n\n', 'net.txt'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt:1');
    expect(e.message).toContain('no nodes');
  });
});
