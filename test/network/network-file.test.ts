import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { networkFromSlurmAddresses, parseNetworkFile, pathForNode, readNetworkFile } from '../../src/topology/network/index.js';
import { tempDir } from '../helpers/temp.js';
import { thrown } from '../helpers/thrown.js';

const example = (name: string) => fileURLToPath(new URL(`../../config/examples/${name}`, import.meta.url));

describe('parseNetworkFile', () => {
  it('recognises topology.conf by a SwitchName= statement, in any case', () => {
    expect(parseNetworkFile('# leaves\n  switchname = s0 Nodes=n1\n', 'x.txt').source).toBe('slurm-topology.conf:x.txt');
    expect(parseNetworkFile('SWITCHNAME=s0 Nodes=n1\n', 'x').source).toBe('slurm-topology.conf:x');
  });

  it('reads anything else as the simple format', () => {
    expect(parseNetworkFile('n1 sw1\n', 'topology.conf').source).toBe('simple:topology.conf');
    expect(parseNetworkFile('# SwitchName=s0 Nodes=n1\nn1 sw1\n', 'net').source).toBe('simple:net');
    expect(parseNetworkFile('n1 SwitchName=s0\n', 'net').source).toBe('simple:net');
  });
});

describe('readNetworkFile', () => {
  it('reads every example file', () => {
    const simple = readNetworkFile(example('network-simple.txt'));
    expect(simple.source).toBe(`simple:${example('network-simple.txt')}`);
    expect(simple.nodes.size).toBe(64);

    const conf = readNetworkFile(example('topology.conf'));
    expect(conf.source).toBe(`slurm-topology.conf:${example('topology.conf')}`);
    expect(conf.nodes.size).toBe(16);
    expect(conf.warnings).toEqual([]);

    const fat = readNetworkFile(example('topology-fat-tree.conf'));
    expect(fat.nodes.size).toBe(16);
    expect(fat.warnings).toHaveLength(4);
  });

  it('names the file in parse errors', () => {
    const dir = tempDir('topocoll-net-');
    const file = join(dir, 'bad.conf');
    writeFileSync(file, 'SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n');
    const e = thrown(() => readNetworkFile(file));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`${file}:2`);
  });

  it('reports a missing file with its path', () => {
    const missing = join(tmpdir(), 'topocoll-does-not-exist', 'net.txt');
    const e = thrown(() => readNetworkFile(missing));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.file).toBe(missing);
    expect(e.message).toContain(missing);
    expect(e.message).toContain('cannot read the network file: no such file');
    expect(e.hint).toContain('--network');
  });
});

describe('pathForNode', () => {
  const net = parseNetworkFile('node[01-64] sw11 sw21\n', 'net.txt');

  it('returns the path of a known node', () => {
    expect(pathForNode(net, 'node07').switches).toEqual(['sw11', 'sw21']);
  });

  it('names the node and the file, and lists the known nodes compactly', () => {
    const e = thrown(() => pathForNode(net, 'gpu01', { rank: 3 }));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('net.txt: node gpu01 is not in net.txt (rank 3, node gpu01)');
    expect(e.hint).toContain('It knows node[01-64].');
    expect(e.hint).not.toContain('Did you mean');
  });

  it('suggests the name that differs only by its domain', () => {
    const e = thrown(() => pathForNode(net, 'node07.cluster.example.org'));
    expect(e.hint).toContain('Did you mean node07?');
    const fqdn = parseNetworkFile('n1.example.org sw1\n', 'fq.txt');
    expect(thrown(() => pathForNode(fqdn, 'n1')).hint).toContain('Did you mean n1.example.org?');
  });

  it('shows only a few nodes when the list is long', () => {
    const many = parseNetworkFile(Array.from({ length: 40 }, (_, i) => `host-${i * 2}-x sw1`).join('\n'), 'many.txt');
    const e = thrown(() => pathForNode(many, 'other'));
    expect(e.hint).toContain('and 32 more');
  });

  it('names the source of a network without a file', () => {
    const e = thrown(() => pathForNode(networkFromSlurmAddresses([{ node: 'a', switches: ['s'] }]), 'b'));
    expect(e.message).toContain('node b is not in slurm-addr');
  });
});
