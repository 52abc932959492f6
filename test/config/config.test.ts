import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEFAULT_CONFIG_PATH, loadConfigFile, parseConfig, resolveConfig, validateConfig } from '../../src/config/load.js';
import { DEFAULT_MACHINE_PROFILE, loadMachineProfile } from '../../src/config/machine-profiles.js';
import { TopocollError } from '../../src/errors.js';
import { resolveNodeIdentity } from '../../src/topology/node-identity.js';
import { ROOT, TS_PATH, generate } from '../../scripts/gen-defaults.mjs';
import { tempDir } from '../helpers/temp.js';

function configError(text: string): TopocollError {
  try {
    parseConfig(text, 'my.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(TopocollError);
    expect((e as TopocollError).code).toBe('ECONFIG');
    return e as TopocollError;
  }
  throw new Error('expected ECONFIG');
}

describe('configuration', () => {
  it('the shipped default file validates and enables every level', () => {
    const config = loadConfigFile(DEFAULT_CONFIG_PATH);
    expect(Object.values(config.levels).every((l) => l.enabled)).toBe(true);
    expect(config.network).toEqual({ source: 'auto', file: null });
    expect(config.node.identity).toBe('auto');
    expect(config.topology.source).toBe('auto');
  });

  it("the shipped default file's cost models hold the default machine profile's values", () => {
    const file = parse(readFileSync(DEFAULT_CONFIG_PATH, 'utf8')) as { shm: { model: unknown }; model: Record<string, unknown> };
    const profile = loadMachineProfile(DEFAULT_MACHINE_PROFILE);
    expect(file.shm.model).toEqual(profile.shmModel);
    const { callUs, combineBytesPerUs, links, oversubscribed } = file.model as { links: Record<string, unknown> } & Record<string, unknown>;
    expect({ callUs, combineBytesPerUs, links: { shm: links.shm, tcp: links.tcp }, oversubscribed }).toEqual(profile.model);
    // And so does an empty configuration.
    const defaults = validateConfig({});
    expect(defaults.shm.model).toEqual(profile.shmModel);
    expect({ ...defaults.model, links: { shm: defaults.model.links.shm, tcp: defaults.model.links.tcp }, levels: undefined }).toEqual({
      ...profile.model,
      levels: undefined,
    });
  });

  it('the generated defaults module holds the shipped files as they parse, and a rank given nothing gets the default file', async () => {
    // A difference here means a stale module: run `npm run gen:defaults`.
    expect(readFileSync(join(ROOT, TS_PATH), 'utf8')).toEqual(await generate());
    expect(resolveConfig(undefined, {})).toEqual(loadConfigFile(DEFAULT_CONFIG_PATH));
  });

  it('fills defaults for an empty file', () => {
    expect(parseConfig('', 'empty.yaml')).toEqual(validateConfig({}));
  });

  it('reads enabled flags and resolves file paths relative to the config file', () => {
    const c = parseConfig('levels:\n  socket: { enabled: false }\nnetwork:\n  file: net.txt\n', '/etc/topocoll/c.yaml');
    expect(c.levels.socket?.enabled).toBe(false);
    expect(c.network.file).toBe('/etc/topocoll/net.txt');
  });

  it('names file, line, column and key of an unknown key', () => {
    const e = configError('network:\n  source: auto\n  fiel: x.txt\n');
    expect(e.file).toBe('my.yaml');
    expect(e.line).toBe(3);
    expect(e.column).toBe(3);
    expect(e.message).toMatch(/^ECONFIG: my\.yaml:3:3: network\.fiel: unknown key "fiel"/);
  });

  it('names the position of a bad value', () => {
    const e = configError('levels:\n  numa:\n    enabled: maybe\n');
    expect([e.line, e.column]).toEqual([3, 14]);
    expect(e.message).toMatch(/levels\.numa\.enabled/);
    const source = configError('network:\n  source: infiniband\n');
    expect([source.line, source.column]).toEqual([2, 11]);
  });

  it('rejects an unknown level name at the key', () => {
    const e = configError('levels:\n  node: { enabled: true }\n  sockets: { enabled: false }\n');
    expect([e.line, e.column]).toEqual([3, 3]);
    expect(e.message).toMatch(/levels\.sockets/);
  });

  it('rejects disabling world', () => {
    const e = configError('levels:\n  world:\n    enabled: false\n');
    expect(e.line).toBe(3);
    expect(e.message).toMatch(/world level cannot be disabled/);
  });

  it('reports YAML syntax errors and duplicate keys with their position', () => {
    expect(configError('levels:\n  numa: { enabled: true\n').line).toBeGreaterThanOrEqual(2);
    const dup = configError('node:\n  identity: auto\nnode:\n  identity: hostname\n');
    expect(dup.line).toBe(3);
    // A second document is an error at its start, not silently dropped.
    const two = configError('node:\n  identity: auto\n---\nnode:\n  identity: hostname\n');
    expect([two.line, two.message]).toEqual([3, expect.stringMatching(/invalid YAML: Source contains multiple documents/)]);
  });

  it('requires network.file when the source is file', () => {
    expect(configError('network:\n  source: file\n').message).toMatch(/network\.file/);
  });

  it('rejects an S0 queue that is not whole 4 KiB fragments, at least one per set, at the key', () => {
    const pages = configError('shm:\n  bcast:\n    queueBytes: 20000\n');
    expect([pages.file, pages.line, pages.column]).toEqual(['my.yaml', 3, 17]);
    expect(pages.message).toMatch(/shm\.bcast\.queueBytes: must be a multiple of 4096/);
    const sets = configError('shm:\n  bcast:\n    sets: 3\n    queueBytes: 8192\n');
    expect(sets.line).toBe(4);
    expect(sets.message).toMatch(/shm\.bcast\.queueBytes: 8192 bytes cannot hold 3 sets/);
    // Not a multiple of sets · 4 KiB: accepted (the last set takes the rest).
    expect(parseConfig('shm:\n  bcast:\n    sets: 4\n    queueBytes: 20480\n', 'my.yaml').shm.bcast.queueBytes).toBe(20480);
  });

  it('takes TOPOCOLL_CONFIG when no path is given and reports a missing file', () => {
    const dir = tempDir('topocoll-config-');
    const file = join(dir, 'c.yaml');
    writeFileSync(file, 'node:\n  identity: name:n7\n');
    expect(resolveConfig(undefined, { TOPOCOLL_CONFIG: file }).node.identity).toBe('name:n7');
    expect(() => loadConfigFile(join(dir, 'missing.yaml'))).toThrow(/ECONFIG: .*missing\.yaml: cannot read/);
  });
});

describe('node identity', () => {
  it('defaults to the short host name, or SLURMD_NODENAME under Slurm', () => {
    expect(resolveNodeIdentity('auto', {}, 'n01.cluster.example')).toBe('n01');
    expect(resolveNodeIdentity('auto', { SLURMD_NODENAME: 'tux3' }, 'n01.cluster')).toBe('tux3');
    expect(resolveNodeIdentity('hostname', {}, 'n01.cluster')).toBe('n01.cluster');
    expect(resolveNodeIdentity('env:MY_NODE', { MY_NODE: 'x' }, 'h')).toBe('x');
    expect(resolveNodeIdentity('name:fixed', {}, 'h')).toBe('fixed');
    expect(() => resolveNodeIdentity('slurm', {}, 'h')).toThrow(/SLURMD_NODENAME is not set/);
  });
});
