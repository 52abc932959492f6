import { describe, expect, it } from 'vitest';
import { describePlan, etcHostsText, parseRates, parseSubnet, planCluster, shorthandNetwork, tbfBurstBytes, uplinkLevel } from '../../src/cluster/plan.js';
import { parseRshArgs } from '../../src/cluster/rsh-args.js';
import { parseNetworkFile } from '../../src/topology/network/index.js';
import { thrown } from '../helpers/thrown.js';

/** The plan of an emulated cluster (src/cluster/plan.ts) and the agent's reading of an ssh command line. */

describe('planCluster', () => {
  it('the shorthand: L leaves × H hosts under a spine, addresses in order, one bridge per switch', () => {
    const plan = planCluster(shorthandNetwork(2, 2));
    expect(plan.hosts.map((h) => [h.name, h.address, plan.switches[h.leaf]!.name, h.port])).toEqual([
      ['node0', '10.99.0.1', 'leaf0', 'h0'],
      ['node1', '10.99.0.2', 'leaf0', 'h1'],
      ['node2', '10.99.0.3', 'leaf1', 'h2'],
      ['node3', '10.99.0.4', 'leaf1', 'h3'],
    ]);
    expect(plan.switches.map((s) => [s.name, s.level, s.parent === undefined ? null : plan.switches[s.parent]!.name, s.bridge, s.uplink])).toEqual([
      ['leaf0', 1, 'spine', 'br0', { uplink: 'up0', downlink: 'dn0' }],
      ['spine', 2, null, 'br1', undefined],
      ['leaf1', 1, 'spine', 'br2', { uplink: 'up2', downlink: 'dn2' }],
    ]);
    expect(plan.prefixLength).toBe(16);
    expect(describePlan(plan)).toBe(
      [
        '  node0  10.99.0.1/16        leaf0 → spine',
        '  node1  10.99.0.2/16        leaf0 → spine',
        '  node2  10.99.0.3/16        leaf1 → spine',
        '  node3  10.99.0.4/16        leaf1 → spine',
        '',
      ].join('\n'),
    );
  });

  it('a simple network file and a Slurm topology.conf give the same tree', () => {
    const simple = planCluster(parseNetworkFile('tux[0-1] s0 s4\ntux[2-3] s1 s4\n', 'net.txt'));
    const slurm = planCluster(parseNetworkFile('SwitchName=s0 Nodes=tux[0-1]\nSwitchName=s1 Nodes=tux[2-3]\nSwitchName=s4 Switches=s[0-1]\n', 'topology.conf'));
    const shape = (p: typeof simple) =>
      p.hosts.map((h) => `${h.name}@${h.address}<${p.switches[h.leaf]!.name}<${p.switches[p.switches[h.leaf]!.parent!]!.name}`);
    expect(shape(simple)).toEqual(['tux0@10.99.0.1<s0<s4', 'tux1@10.99.0.2<s0<s4', 'tux2@10.99.0.3<s1<s4', 'tux3@10.99.0.4<s1<s4']);
    expect(shape(slurm).sort()).toEqual(shape(simple).sort());
  });

  it('leaf switches without a common parent are joined under one added bridge, so every host reaches every other', () => {
    const plan = planCluster(parseNetworkFile('a[0-1] sa\nb[0-1] sb\n', 'net.txt'));
    const root = plan.switches.find((s) => s.added)!;
    expect(root).toMatchObject({ name: 'root', level: 2, parent: undefined });
    expect(plan.switches.filter((s) => !s.added).every((s) => s.parent === root.index)).toBe(true);
  });

  it('an unbalanced tree: a switch that skips a level is cabled to the next switch up', () => {
    // n2's path is s2, (none), top: s2's uplink goes to top, a level-3 link.
    const plan = planCluster(
      parseNetworkFile('SwitchName=s0 Nodes=n[0-1]\nSwitchName=s1 Switches=s0\nSwitchName=s2 Nodes=n2\nSwitchName=top Switches=s1,s2\n', 't.conf'),
    );
    const named = (n: string) => plan.switches.find((s) => s.name === n)!;
    expect(plan.switches[named('s2').parent!]!.name).toBe('top');
    expect(uplinkLevel(plan, named('s2'))).toBe(3);
    expect(uplinkLevel(plan, named('s0'))).toBe(2);
    expect(plan.switches.filter((s) => s.added)).toEqual([]);
  });

  it('rates by level: leaf links at the hosts, spine links between leaf and spine bridges', () => {
    const rates = parseRates('leaf=10gbit, spine=1.5gbit');
    expect([...rates]).toEqual([
      [1, { text: '10gbit', bytesPerSecond: 1.25e9 }],
      [2, { text: '1.5gbit', bytesPerSecond: 1.875e8 }],
    ]);
    expect([...parseRates('switch1=100mbps')]).toEqual([[1, { text: '100mbps', bytesPerSecond: 1e8 }]]);
    const plan = planCluster(shorthandNetwork(2, 1), { rates });
    const leaf0 = plan.switches.find((s) => s.name === 'leaf0')!;
    expect(uplinkLevel(plan, leaf0)).toBe(2);
    // The bucket holds a 64 KiB GSO segment at least, and 1 ms at the rate.
    expect(tbfBurstBytes({ text: '1mbit', bytesPerSecond: 125e3 })).toBe(128 * 1024);
    expect(tbfBurstBytes(rates.get(1)!)).toBe(1.25e6);
    expect(thrown(() => parseRates('leaf=fast'), 'EINVAL').message).toContain('"leaf=fast" is not <level>=<rate>');
    expect(thrown(() => parseRates('core=1gbit'), 'EINVAL').hint).toContain('leaf, spine or switch<N>');
    expect(thrown(() => parseRates('leaf=1gbit,switch1=2gbit'), 'EINVAL').message).toContain('twice');
    expect(thrown(() => planCluster(shorthandNetwork(1, 2), { rates: parseRates('switch3=1gbit') }), 'EINVAL').message).toContain('level 2');
  });

  it('subnets: any prefix from /8 to /30 with room for the hosts; no host bits', () => {
    expect(parseSubnet('192.168.7.0/24')).toEqual({ base: 0xc0a80700, prefixLength: 24 });
    expect(planCluster(shorthandNetwork(1, 3), { subnet: '192.168.7.0/24' }).hosts.map((h) => h.address)).toEqual([
      '192.168.7.1',
      '192.168.7.2',
      '192.168.7.3',
    ]);
    expect(planCluster(shorthandNetwork(1, 2), { subnet: '10.0.0.4/30' }).hosts.map((h) => h.address)).toEqual(['10.0.0.5', '10.0.0.6']);
    expect(thrown(() => planCluster(shorthandNetwork(1, 3), { subnet: '10.0.0.4/30' }), 'EINVAL').message).toContain('no room for 3 hosts');
    expect(thrown(() => parseSubnet('10.1.2.3/8'), 'EINVAL').message).toContain('host bits');
    expect(thrown(() => parseSubnet('10.0.0.0/31'), 'EINVAL').message).toContain('8 to 30 bits');
    expect(thrown(() => parseSubnet('300.0.0.0/16'), 'EINVAL').code).toBe('EINVAL');
  });

  it('node names that cannot be host names, and too many hosts, are refused', () => {
    expect(thrown(() => planCluster(parseNetworkFile('node_1 sw\n', 'net.txt')), 'ETOPOLOGY').message).toContain('node name "node_1" cannot be a host name');
    expect(thrown(() => shorthandNetwork(33, 32), 'EINVAL').message).toContain('more than 1024 hosts');
    expect(thrown(() => shorthandNetwork(0, 2), 'EINVAL').message).toContain('--leaves must be a positive integer');
  });

  it('/etc/hosts: every host by address; itself by its address, or as 127.0.1.1 the Debian way', () => {
    const plan = planCluster(shorthandNetwork(1, 2));
    expect(etcHostsText(plan, 1, 'address')).toBe('127.0.0.1 localhost\n10.99.0.1 node0\n10.99.0.2 node1\n');
    expect(etcHostsText(plan, 1, 'loopback')).toBe('127.0.0.1 localhost\n127.0.1.1 node1\n10.99.0.1 node0\n');
  });
});

describe('parseRshArgs (the agent, called as ssh would be)', () => {
  it("Open MPI's rsh launcher: host, then the command words, joined for sh -c", () => {
    expect(parseRshArgs(['node1', 'orted', '-mca', 'ess', '"env"'])).toEqual({ host: 'node1', command: 'orted -mca ess "env"' });
  });

  it("Hydra's ssh launcher passes -x; options with values, clusters of flags, user@ and -- are skipped", () => {
    expect(parseRshArgs(['-x', 'node2', '/usr/bin/hydra_pmi_proxy', '--control-port', 'node0:4242'])).toEqual({
      host: 'node2',
      command: '/usr/bin/hydra_pmi_proxy --control-port node0:4242',
    });
    expect(parseRshArgs(['-o', 'StrictHostKeyChecking=no', '-p', '22', '-xT', '-lroot', 'root@node3', 'true'])).toEqual({ host: 'node3', command: 'true' });
    expect(parseRshArgs(['-xp', '22', '--', 'node0', 'echo', 'a b'])).toEqual({ host: 'node0', command: 'echo a b' });
    expect(parseRshArgs(['node0'])).toEqual({ host: 'node0', command: '' });
    expect(thrown(() => parseRshArgs(['-x']), 'EINVAL').message).toContain('no host given');
  });
});
