import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { resolveNetworkSource } from '../../src/topology/network/network-source.js';
import { thrown } from '../helpers/thrown.js';

const example = new URL('../../config/examples/topology.conf', import.meta.url).pathname;
const slurmEnv = { SLURM_TOPOLOGY_ADDR: 's4.s1.tux5', SLURM_TOPOLOGY_ADDR_PATTERN: 'switch.switch.node' };
const network = (n: object) => validateConfig({ network: n }).network;

describe('resolveNetworkSource', () => {
  it('auto: the file when one is set', () => {
    const view = resolveNetworkSource(network({ file: example }), slurmEnv, 'tux5');
    expect(view.kind).toBe('file');
    if (view.kind === 'file') expect(view.network.nodes.get('tux5')!.switches).toEqual(['s1', 's4']);
  });

  it('auto: this node’s Slurm address when there is no file, agreeing with topology.conf', () => {
    const view = resolveNetworkSource(network({}), slurmEnv, 'tux5');
    expect(view).toEqual({ kind: 'slurm', path: { node: 'tux5', switches: ['s1', 's4'] } });
  });

  it('auto: no network outside Slurm without a file; none turns even Slurm’s off', () => {
    expect(resolveNetworkSource(network({}), {}, 'h')).toEqual({ kind: 'none' });
    expect(resolveNetworkSource(network({ source: 'none' }), slurmEnv, 'tux5')).toEqual({ kind: 'none' });
  });

  it('slurm: requires the variables and a node name that matches Slurm’s', () => {
    expect(thrown(() => resolveNetworkSource(network({ source: 'slurm' }), {}, 'h'), 'ECONFIG').message).toMatch(/SLURM_TOPOLOGY_ADDR/);
    const e = thrown(() => resolveNetworkSource(network({ source: 'slurm' }), slurmEnv, 'tux5.cluster'), 'ECONFIG');
    expect(e.message).toMatch(/names node "tux5" but this process calls its node "tux5\.cluster"/);
    expect(e.hint).toMatch(/node\.identity/);
  });

  it('file: a missing file is an error naming it', () => {
    expect(thrown(() => resolveNetworkSource(network({ source: 'file', file: '/nonexistent/net.txt' }), {}, 'h'), 'ETOPOLOGY').message).toMatch(
      /\/nonexistent\/net\.txt: cannot read the network file: no such file/,
    );
  });
});
