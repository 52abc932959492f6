import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { processStartTime } from '../../src/cluster/build.js';
import { createState, readState, removeOwnState, stateFile, type ClusterState } from '../../src/cluster/state.js';
import { tempDir } from '../helpers/temp.js';
import { thrown } from '../helpers/thrown.js';

/** The state file of a kept cluster (src/cluster/state.ts): created once, read while its keeper runs, removed only by its own. */
describe('cluster state file', () => {
  const state = (keeper: { pid: number; startTime: number }): ClusterState => ({
    version: 1,
    name: 'c',
    keeper,
    cleanerPid: 1,
    hosts: [{ name: 'node0', address: '10.99.0.1', pid: process.pid, startTime: processStartTime(process.pid)!, leaf: 'leaf0' }],
    switches: [{ name: 'leaf0', level: 1 }],
    subnetPrefix: 16,
    keep: [],
    namespaces: { net: [1], mnt: [2] },
    agent: '/x/cluster-agent.js',
  });
  const self = () => ({ pid: process.pid, startTime: processStartTime(process.pid)! });

  it('lives under $TOPOCOLL_CLUSTER_DIR (else /run/topocoll) by name; a name is letters, digits, _ and -', () => {
    expect(stateFile({}, 'default')).toBe('/run/topocoll/cluster-default.json');
    expect(stateFile({ TOPOCOLL_CLUSTER_DIR: '/d' }, 'c-1')).toBe('/d/cluster-c-1.json');
    expect(thrown(() => stateFile({}, '../x'), 'EINVAL').message).toContain('cluster name "../x"');
  });

  it('is created once: a second keeper of the name gets EINVAL and the first file stays', () => {
    const path = join(tempDir('cluster-state-'), 'sub', 'cluster-c.json');
    createState(path, state(self()));
    expect(readState(path)?.keeper.pid).toBe(process.pid);
    expect(thrown(() => createState(path, { ...state(self()), cleanerPid: 2 }), 'EINVAL').message).toContain('cluster "c" is already up');
    expect((JSON.parse(readFileSync(path, 'utf8')) as ClusterState).cleanerPid).toBe(1);
  });

  it('a file whose keeper no longer runs (another start time under its pid) counts as absent and is removed', () => {
    const path = join(tempDir('cluster-state-'), 'cluster-c.json');
    writeFileSync(path, JSON.stringify(state({ pid: process.pid, startTime: processStartTime(process.pid)! + 1 })));
    expect(readState(path)).toBeUndefined();
    expect(existsSync(path)).toBe(false);
  });

  it('is removed only by the keeper that wrote it', () => {
    const path = join(tempDir('cluster-state-'), 'cluster-c.json');
    createState(path, state(self()));
    removeOwnState(path, process.pid + 1);
    expect(existsSync(path)).toBe(true);
    removeOwnState(path, process.pid);
    expect(existsSync(path)).toBe(false);
  });
});
