import { describe, expect, it } from 'vitest';
import { coRunnersOf, hostOversubscribed, kernelId, machineOf, machineOversubscribed, nodeFactsOf } from '../../src/runtime/co-runners.js';

const cpus = (entries: [number, number[]][]) => new Map(entries);

describe('coRunnersOf', () => {
  it('names the ranks bound to the same single core (binding wrapped around 2 cores)', () => {
    const job = cpus([
      [0, [0]],
      [1, [1]],
      [2, [0]],
      [3, [1]],
      [4, [0]],
    ]);
    expect(coRunnersOf(0, job)).toEqual([2, 4]);
    expect(coRunnersOf(3, job)).toEqual([1]);
    expect(coRunnersOf(4, job)).toEqual([0, 2]);
  });

  it('names nobody when every rank has a core of its own', () => {
    expect(
      coRunnersOf(
        0,
        cpus([
          [0, [0]],
          [1, [1]],
        ]),
      ),
    ).toEqual([]);
  });

  it('names nobody where half the ranks sharing a set or more can run at once', () => {
    // Two ranks on a 2-PU core: both run. Three on it: each other rank runs half the time.
    expect(
      coRunnersOf(
        0,
        cpus([
          [0, [0, 1]],
          [1, [0, 1]],
        ]),
      ),
    ).toEqual([]);
    expect(
      coRunnersOf(
        0,
        cpus([
          [0, [0, 1]],
          [1, [0, 1]],
          [2, [0, 1]],
        ]),
      ),
    ).toEqual([]);
  });

  it('names the others of an oversubscribed set, bound or not', () => {
    // Eight unbound ranks on two cores: another rank runs 1/7 of the time.
    const unbound = cpus([0, 1, 2, 3, 4, 5, 6, 7].map((r) => [r, [0, 1]] as [number, number[]]));
    expect(coRunnersOf(5, unbound)).toEqual([0, 1, 2, 3, 4, 6, 7]);
  });

  it('compares sets, not overlaps: a rank on cores 0–1 does not share with one on core 0', () => {
    expect(
      coRunnersOf(
        0,
        cpus([
          [0, [0]],
          [1, [0, 1]],
          [2, [0]],
        ]),
      ),
    ).toEqual([2]);
  });

  it('names nobody for a rank it has no set for', () => {
    expect(
      coRunnersOf(
        9,
        cpus([
          [0, [0]],
          [1, [0]],
        ]),
      ),
    ).toEqual([]);
  });
});

describe('hostOversubscribed', () => {
  it('counts the ranks against the host CPUs, or against the CPUs they are bound to', () => {
    expect(
      hostOversubscribed(
        [
          [0, 1],
          [0, 1],
          [0, 1],
        ],
        2,
      ),
    ).toBe(true);
    expect(
      hostOversubscribed(
        [
          [0, 1],
          [0, 1],
        ],
        2,
      ),
    ).toBe(false);
    expect(hostOversubscribed([[0], [1]], 2)).toBe(false);
    // Two ranks bound to one core of two: they take turns on it.
    expect(hostOversubscribed([[0], [0]], 2)).toBe(true);
    expect(hostOversubscribed([[0], [0, 1], [1]], 4)).toBe(true);
    // A rank whose CPUs are unknown: the host's count decides.
    expect(hostOversubscribed([[0], []], 2)).toBe(false);
  });
});

describe('machineOversubscribed: ranks on one kernel share its CPUs whatever their host names', () => {
  // 4 hosts × 2 unbound ranks, as hosts made of namespaces on this 2-core machine make them.
  const hosts = (kernel: (h: number) => string) => Array.from({ length: 8 }, (_, r) => ({ host: `host${r >> 1}`, kernel: kernel(r >> 1), cpus: '0-1' }));

  it('one kernel under four host names: 8 ranks on 2 CPUs', () => {
    const infos = hosts(() => 'b7c1');
    for (let r = 0; r < 8; r++) expect(machineOversubscribed(r, infos, 2)).toBe(true);
    expect(new Set(infos.map(machineOf)).size).toBe(1);
  });

  it('four kernels (four machines): 2 ranks on 2 CPUs each', () => {
    const infos = hosts((h) => `kernel${h}`);
    for (let r = 0; r < 8; r++) expect(machineOversubscribed(r, infos, 2)).toBe(false);
  });

  it('without a kernel id the host name decides, as before', () => {
    const infos = hosts(() => '');
    expect(machineOversubscribed(0, infos, 2)).toBe(false);
    expect(machineOversubscribed(0, infos, 1)).toBe(true);
    expect(machineOf({ host: 'a', kernel: '' })).not.toBe(machineOf({ host: 'b', kernel: '' }));
  });

  it("reads this machine's kernel id", () => {
    expect(kernelId()).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('nodeFactsOf: every node priced with its own machine, alike on every rank', () => {
  it("a node's CPUs are its machine's, and whether that machine's ranks outnumber them", () => {
    const infos = [
      // node a: 3 unbound ranks on a 2-CPU machine
      ...[0, 1, 2].map(() => ({ node: 'a', host: 'a', kernel: 'k1', cpus: '0-1', machineCpus: 2 })),
      // node b: 2 ranks bound to a core each of a 64-CPU machine
      { node: 'b', host: 'b', kernel: 'k2', cpus: '0', machineCpus: 64 },
      { node: 'b', host: 'b', kernel: 'k2', cpus: '1', machineCpus: 64 },
    ];
    const facts = nodeFactsOf(infos, 8);
    expect(facts.get('a')).toEqual({ cores: 2, oversubscribed: true });
    expect(facts.get('b')).toEqual({ cores: 64, oversubscribed: false });
  });

  it('emulated nodes of one machine share its CPUs; a rank without machineCpus takes the fallback', () => {
    const infos = ['n0', 'n0', 'n1', 'n1'].map((node) => ({ node, host: node, kernel: 'k', cpus: '0-1' }));
    expect(nodeFactsOf(infos, 2)).toEqual(
      new Map([
        ['n0', { cores: 2, oversubscribed: true }],
        ['n1', { cores: 2, oversubscribed: true }],
      ]),
    );
  });
});
