import { describe, expect, it } from 'vitest';
import { cli } from './helpers.js';

/** `topocoll cluster`'s command line: what it refuses before it makes anything (no process starts here). */
describe('topocoll cluster (arguments)', () => {
  const env = { TOPOCOLL_CLUSTER_DIR: '/nonexistent/topocoll-cluster-test' };

  it('--help lists the subcommands; an unknown one is a usage error (EINVAL, exit 2)', async () => {
    const help = await cli(['cluster', '--help']);
    expect(help.code).toBe(0);
    for (const sub of ['cluster up', 'cluster exec', 'cluster status', 'cluster down']) expect(help.stdout).toContain(`topocoll ${sub}`);
    const bad = await cli(['cluster', 'start']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('topocoll cluster: EINVAL: unknown subcommand "start": it is one of up, exec, status, down');
  });

  it('up needs either a network file or the shorthand, and checks rates, subnet and name before anything', async () => {
    expect((await cli(['cluster', 'up'], env)).stderr).toContain('give either --network FILE or --leaves L --hosts H');
    expect((await cli(['cluster', 'up', '--leaves', '2', '--hosts', '2', '--network', 'x'], env)).stderr).toContain('give either');
    expect((await cli(['cluster', 'up', '--leaves', '2', '--hosts', '2', '--rate', 'leaf=fast'], env)).stderr).toContain('"leaf=fast" is not <level>=<rate>');
    expect((await cli(['cluster', 'up', '--leaves', '2', '--hosts', '2', '--subnet', '10.0.0.1/16'], env)).stderr).toContain('has host bits set');
    expect((await cli(['cluster', 'up', '--name', 'a/b', '--leaves', '1', '--hosts', '1'], env)).stderr).toContain('cluster name "a/b"');
    expect((await cli(['cluster', 'up', '--network', 'no-such-file.txt'], env)).stderr).toContain('ETOPOLOGY');
  });

  it('exec, status and down name the cluster that is not up', async () => {
    const exec = await cli(['cluster', 'exec', '--name', 'c1', 'node0', '--', 'true'], env);
    expect(exec.code).toBe(1);
    expect(exec.stderr).toContain('no cluster named "c1" is up');
    expect((await cli(['cluster', 'exec'], env)).stderr).toContain('no host given');
    expect((await cli(['cluster', 'down', '--name', 'c1'], env)).stderr).toContain('no cluster named "c1" is up');
    expect((await cli(['cluster', 'status'], env)).stdout).toBe('no cluster is up\n');
  });
});
