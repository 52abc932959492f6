import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { hostsConfigText } from '../../src/cli/bench-hosts.js';
import { thrown } from '../helpers/thrown.js';

describe('bench --hosts: the ranks’ configuration', () => {
  it('the defaults with the cluster’s network; flat turns the switch levels off', () => {
    expect(parse(hostsConfigText('', '/tmp/x/network.txt', 'auto'))).toEqual({ network: { source: 'file', file: '/tmp/x/network.txt' } });
    expect(parse(hostsConfigText('', '/tmp/x/network.txt', 'flat'))).toEqual({
      network: { source: 'file', file: '/tmp/x/network.txt' },
      levels: { switch1: { enabled: false }, switch2: { enabled: false } },
    });
  });

  it('--config: the user’s keys kept, its network replaced, its levels kept beside the switches flat turns off', () => {
    const base = 'allreduce:\n  top: recursive-doubling\nnetwork:\n  source: slurm\nlevels:\n  numa: { enabled: false }\n';
    expect(parse(hostsConfigText(base, 'n.txt', 'auto'))).toEqual({
      allreduce: { top: 'recursive-doubling' },
      network: { source: 'file', file: 'n.txt' },
      levels: { numa: { enabled: false } },
    });
    expect(parse(hostsConfigText(base, 'n.txt', 'flat')).levels).toEqual({
      numa: { enabled: false },
      switch1: { enabled: false },
      switch2: { enabled: false },
    });
  });

  it('a file that is not a mapping is ECONFIG', () => {
    expect(thrown(() => hostsConfigText('- 1\n- 2\n', 'n.txt', 'auto'))).toMatchObject({ code: 'ECONFIG' });
  });
});
