/**
 * Hostile input files: every one must fail with a TopocollError of the right code, naming the
 * file and the limit, in bounded memory and well under a second. The corpus is generated here;
 * the cases that would exhaust memory or stack if a limit were missing run in a child process
 * (the built modules in dist/, as `npm test` builds them first) with a capped heap, which reports
 * its peak RSS and the time of the call itself.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { parseHwlocXml } from '../../src/topology/hwloc-xml.js';
import { parseIndexList } from '../../src/topology/index-list.js';
import { parseLocalitiesFile } from '../../src/topology/localities-file.js';
import { expandHostlist, HostlistBudget, hostlistSize } from '../../src/topology/network/hostlist.js';
import { parseNetworkFile } from '../../src/topology/network/network-file.js';
import { maxInputBytes, readTextFile } from '../../src/util/read-text-file.js';
import { repoRoot } from '../cli/helpers.js';
import { thrown } from '../helpers/thrown.js';

/** Peak resident memory a failing parse may reach, Node's own ~50 MB included. */
const RSS_LIMIT_MB = 300;
/**
 * Time the failing call itself may take (the child's start-up is not counted): a bound that
 * proves the read stops, not a speed. Reading the 64 MiB limit takes 0.7 s on an idle 2-vCPU VM
 * whose page faults are slow, and over 2 s beside the other test files running.
 */
const CALL_LIMIT_MS = 5000;

interface ChildOutcome {
  ok: boolean;
  name?: string;
  code?: string;
  message?: string;
  ms: number;
  maxRssMB: number;
}

/**
 * Runs `call` (a JavaScript expression over the named dist modules, bound as `m0`, `m1`, …) in a
 * fresh Node whose old space is capped at 512 MB, so that a missing limit fails the test quickly
 * instead of taking the machine's memory.
 */
function inChild(modules: string[], call: string, env: NodeJS.ProcessEnv = {}): ChildOutcome {
  const imports = modules.map((m, i) => `const m${i} = await import(${JSON.stringify(`${repoRoot}dist/${m}`)});`).join('\n');
  const script = `${imports}
const t0 = performance.now();
let out = { ok: true };
try { ${call}; } catch (e) { out = { ok: false, name: e?.name, code: e?.code, message: String(e?.message).slice(0, 4000) }; }
finally {
  out.ms = performance.now() - t0;
  out.maxRssMB = process.resourceUsage().maxRSS / 1024;
  process.stdout.write(JSON.stringify(out));
}`;
  const r = spawnSync(process.execPath, ['--max-old-space-size=512', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, ...env },
  });
  if (r.status !== 0 || r.stdout === '') throw new Error(`child failed (status ${r.status}, signal ${r.signal}): ${r.stderr.slice(0, 2000)}`);
  return JSON.parse(r.stdout) as ChildOutcome;
}

/** The child failed with `code`, a message matching every pattern, within the memory and time limits. */
function expectBoundedFailure(outcome: ChildOutcome, code: string, ...patterns: RegExp[]): void {
  expect(outcome.ok, 'the hostile input was accepted').toBe(false);
  expect(outcome.name).toBe('TopocollError');
  expect(outcome.code).toBe(code);
  for (const p of patterns) expect(outcome.message).toMatch(p);
  expect(outcome.message!.length).toBeLessThan(1000);
  expect(outcome.maxRssMB).toBeLessThan(RSS_LIMIT_MB);
  expect(outcome.ms).toBeLessThan(CALL_LIMIT_MS);
}

let dir: string;
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'topocoll-hostile-'));
  if (!existsSync(`${repoRoot}dist/util/read-text-file.js`)) throw new Error('dist/ is not built: run npm run build');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `n[0-65535,…]` with `ranges` ranges: 24 KB for 3000 ranges, 196 million names if expanded. */
const manyRanges = (ranges: number): string => `n[${Array.from({ length: ranges }, () => '0-65535').join(',')}]`;

describe('endless and oversized files', () => {
  const readers: [string, string, string, string][] = [
    ['network file', 'topology/network/network-file.js', 'readNetworkFile', 'ETOPOLOGY'],
    ['hwloc XML file', 'topology/hwloc-xml.js', 'readHwlocXmlFile', 'ETOPOLOGY'],
    ['localities file', 'topology/localities-file.js', 'readLocalitiesFile', 'ETOPOLOGY'],
    ['configuration file', 'config/load.js', 'loadConfigFile', 'ECONFIG'],
  ];
  for (const [what, module, fn, code] of readers) {
    it(`/dev/zero as ${what} stops at the 64 MiB limit`, () => {
      const outcome = inChild([module], `m0.${fn}('/dev/zero')`);
      expectBoundedFailure(
        outcome,
        code,
        new RegExp(`^${code}: /dev/zero: the ${what} is larger than 64 MiB \\(67108864 bytes\\), the limit for input files`),
        /TOPOCOLL_MAX_INPUT_BYTES/,
      );
    });
  }

  it('an endless FIFO stops at the limit too (its size, like /dev/zero’s, is 0)', () => {
    const fifo = join(dir, 'fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const writer = spawn('sh', ['-c', `exec cat /dev/zero > '${fifo}'`], { stdio: 'ignore' });
    try {
      const outcome = inChild(['topology/network/network-file.js'], `m0.readNetworkFile(${JSON.stringify(fifo)})`);
      expectBoundedFailure(outcome, 'ETOPOLOGY', /fifo: the network file is larger than 64 MiB/);
    } finally {
      writer.kill();
    }
  });

  it('TOPOCOLL_MAX_INPUT_BYTES changes the limit, and a bad value is ECONFIG naming it', () => {
    const path = file('net.txt', 'n[1-4] sw1\n'.repeat(200));
    const outcome = inChild(['topology/network/network-file.js'], `m0.readNetworkFile(${JSON.stringify(path)})`, { TOPOCOLL_MAX_INPUT_BYTES: '1KiB' });
    expectBoundedFailure(outcome, 'ETOPOLOGY', /net\.txt: the network file is larger than 1 KiB \(1024 bytes\)/);
    expect(maxInputBytes({ TOPOCOLL_MAX_INPUT_BYTES: '2048' })).toBe(2048);
    expect(maxInputBytes({ TOPOCOLL_MAX_INPUT_BYTES: '128MiB' })).toBe(128 << 20);
    expect(maxInputBytes({})).toBe(64 << 20);
    for (const bad of ['lots', '0', '-1', '1TiB', '99999999999G']) {
      expect(thrown(() => maxInputBytes({ TOPOCOLL_MAX_INPUT_BYTES: bad }), 'ECONFIG').message).toContain(`TOPOCOLL_MAX_INPUT_BYTES="${bad}"`);
    }
  });

  it('a file exactly at the limit is read whole', () => {
    const path = file('exact.txt', 'x'.repeat(4096));
    const previous = process.env.TOPOCOLL_MAX_INPUT_BYTES;
    process.env.TOPOCOLL_MAX_INPUT_BYTES = '4096';
    try {
      expect(readTextFile(path, 'ETOPOLOGY', 'test file')).toHaveLength(4096);
      writeFileSync(path, 'x'.repeat(4097));
      expect(thrown(() => readTextFile(path, 'ETOPOLOGY', 'test file'), 'ETOPOLOGY').message).toContain('larger than 4 KiB (4096 bytes)');
    } finally {
      if (previous === undefined) delete process.env.TOPOCOLL_MAX_INPUT_BYTES;
      else process.env.TOPOCOLL_MAX_INPUT_BYTES = previous;
    }
  });

  it('the CLI reports /dev/zero as --network with its exit code and message', () => {
    const localities = file('job.loc', '0 n1 -\n1 n2 -\n');
    const args = [`${repoRoot}dist/cli/main.js`, 'groups', '--localities', localities, '--network', '/dev/zero'];
    const timed = existsSync('/usr/bin/time');
    const r = timed
      ? spawnSync('/usr/bin/time', ['-f', 'maxrss-kb %M', process.execPath, '--max-old-space-size=512', ...args], { encoding: 'utf8', timeout: 30_000 })
      : spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^topocoll groups: ETOPOLOGY: \/dev\/zero: the network file is larger than 64 MiB/);
    if (timed) expect(Number(/maxrss-kb (\d+)/.exec(r.stderr)?.[1]) / 1024).toBeLessThan(RSS_LIMIT_MB);
  });
});

describe('hostlists', () => {
  it('a 24 KB bracket of 3000 ranges fails before expanding (it crashed Node at 4.9 GB)', () => {
    const path = file('ranges.txt', `# 3000 ranges\n${manyRanges(3000)} sw1 spine\n`);
    const outcome = inChild(['topology/network/network-file.js'], `m0.readNetworkFile(${JSON.stringify(path)})`);
    expectBoundedFailure(outcome, 'ETOPOLOGY', /ranges\.txt:2:1: hostlist "n\[0-65535,0-65535,.*…" \(24002 characters\) expands to more than 1048576 names/);
  });

  it('the same bracket in topology.conf Nodes= and Switches=', () => {
    for (const key of ['Nodes', 'Switches']) {
      const path = file('ranges.conf', `SwitchName=s0 Nodes=x1\nSwitchName=top ${key}=${manyRanges(3000)}\n`);
      const outcome = inChild(['topology/network/network-file.js'], `m0.readNetworkFile(${JSON.stringify(path)})`);
      expectBoundedFailure(outcome, 'ETOPOLOGY', /ranges\.conf:2:16: hostlist .* expands to more than 1048576 names/);
    }
  });

  it('lines that each stay under the per-expression limit share one budget per file', () => {
    const line = (i: number) => `p${i}n${manyRanges(15).slice(1)} leaf${i} spine`; // 983 040 names each
    const path = file('lines.txt', Array.from({ length: 400 }, (_, i) => line(i)).join('\n'));
    const outcome = inChild(['topology/network/network-file.js'], `m0.readNetworkFile(${JSON.stringify(path)})`);
    expectBoundedFailure(outcome, 'ETOPOLOGY', /lines\.txt:2:1: hostlist "p1n\[0-65535,.*takes the names of this file past 1048576, the limit for one file/);
    const conf = file('lines.conf', Array.from({ length: 400 }, (_, i) => `SwitchName=leaf${i} Nodes=${line(i).split(' ')[0]}`).join('\n'));
    expectBoundedFailure(
      inChild(['topology/network/network-file.js'], `m0.readNetworkFile(${JSON.stringify(conf)})`),
      'ETOPOLOGY',
      /lines\.conf:2:\d+: .*past 1048576, the limit for one file/,
    );
  });

  it('counts without expanding; a budget takes names up to its limit', () => {
    expect(hostlistSize(manyRanges(16))).toBe(1 << 20);
    expect(thrown(() => hostlistSize(manyRanges(17)), 'ETOPOLOGY').message).toContain('expands to more than 1048576 names');
    const budget = new HostlistBudget(100);
    budget.take('n[1-60]', {});
    budget.take('m[1-40]', {});
    expect(thrown(() => budget.take('x', { file: 'f', line: 9 }), 'ETOPOLOGY').message).toBe(
      'ETOPOLOGY: f:9: hostlist "x" takes the names of this file past 100, the limit for one file. No cluster has that many nodes; check the ranges for a typo.',
    );
    expect(thrown(() => expandHostlist(`n[0-1]${'x'.repeat(300)}`), 'ETOPOLOGY').message).toContain('more than 255');
  });
});

describe('index lists and locality strings', () => {
  it('a 50 MB cpuset in a localities file fails at 2^20 elements (it used 2.1 GB)', () => {
    const cpus = Array.from({ length: 1000 }, (_, i) => i).join(',') + ',';
    const path = file('big.loc', `0 n1 HT${cpus.repeat(Math.ceil(50e6 / cpus.length))}0\n`);
    const outcome = inChild(['topology/localities-file.js'], `m0.readLocalitiesFile(${JSON.stringify(path)})`);
    expectBoundedFailure(
      outcome,
      'ETOPOLOGY',
      /big\.loc:1: locality string "HT0,1,2,.*…" \(\d{8} characters\): token .* more than 1048576 indices \(repeats included\)/,
    );
  });

  it('a 50 MB locality string of full ranges fails the same way', () => {
    const outcome = inChild(['topology/locality-string.js'], `m0.parseLocality('SK0:HT' + '0-1048575,'.repeat(5_000_000) + '0', { rank: 7 })`);
    expectBoundedFailure(outcome, 'ETOPOLOGY', /more than 1048576 indices/, /\(rank 7\)/);
  });

  it('accepts 2^20 indices and refuses one repeat more', () => {
    expect(parseIndexList('0-1048575')).toHaveLength(1 << 20);
    expect(thrown(() => parseIndexList('0-1048575,5'), 'ETOPOLOGY').message).toContain('more than 1048576 indices');
  });

  it('a localities file line with millions of fields is refused without splitting them all', () => {
    const e = thrown(() => parseLocalitiesFile(`0 n1 -${' x'.repeat(5_000_000)}\n`, 'wide.loc'), 'ETOPOLOGY');
    expect(e.message).toBe(
      'ETOPOLOGY: wide.loc:1: expected "<rank> <node> <locality>", found more than 3 fields. Write one rank per line, e.g. "0 node01 SK0:L30:L20:L10:CR0:HT0:NM0" ("-" when the locality is unknown).',
    );
  });

  it('a localities file of more than 2^21 lines is refused before it is parsed', () => {
    const outcome = inChild(['topology/localities-file.js'], `m0.parseLocalitiesFile('\\n'.repeat(60 << 20), 'blank.loc')`);
    expectBoundedFailure(outcome, 'ETOPOLOGY', /^ETOPOLOGY: blank\.loc:2097153: the file has more than 2097152 lines/);
  });
});

describe('hwloc XML', () => {
  const xml = (body: string, prolog = '') => `<?xml version="1.0" encoding="UTF-8"?>\n${prolog}<topology version="2.0">\n${body}\n</topology>\n`;
  const machine = '<object type="Machine" cpuset="0x00000001"><object type="PU" os_index="0" cpuset="0x00000001"/></object>';

  it('200 000 nested elements fail at depth 128 without a stack overflow', () => {
    const path = file('deep.xml', xml('<object type="Group" cpuset="0x1">'.repeat(200_000) + '</object>'.repeat(200_000)));
    const outcome = inChild(['topology/hwloc-xml.js'], `m0.readHwlocXmlFile(${JSON.stringify(path)})`);
    expectBoundedFailure(outcome, 'ETOPOLOGY', /deep\.xml:3:\d+: elements nest more than 128 deep, the limit for an hwloc XML file/);
  });

  it('a billion-laughs entity declaration is refused', () => {
    const entities = ['<!ENTITY lol0 "lol">', ...Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i};`.repeat(10)}">`)];
    const path = file(
      'lol.xml',
      xml(machine.replace('/>', '>&lol9;</object>').replace('</object></object>', '</object>'), `<!DOCTYPE topology [\n${entities.join('\n')}\n]>\n`),
    );
    const outcome = inChild(['topology/hwloc-xml.js'], `m0.readHwlocXmlFile(${JSON.stringify(path)})`);
    expectBoundedFailure(outcome, 'ETOPOLOGY', /lol\.xml:2:1: the document type declaration has an internal subset/);
  });

  it('an external entity is refused, and nothing is read from it', () => {
    const text = xml(machine.replace('type="Machine"', 'type="Machine" name="&xxe;"'), '<!DOCTYPE topology [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> ]>\n');
    const e = thrown(() => parseHwlocXml(text, 'xxe.xml'), 'ETOPOLOGY');
    expect(e.message).toMatch(/^ETOPOLOGY: xxe\.xml:2:1: the document type declaration has an internal subset/);
    expect(e.message).not.toContain('root:');
  });

  it('keeps reading the DOCTYPE hwloc writes and an entity reference in text', () => {
    const topo = parseHwlocXml(xml(machine.replace('/>', '>a &amp; b</object>'), '<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'), 'ok.xml');
    expect(topo.pus).toEqual([0]);
  });

  it('too many elements, too many attributes or a huge attribute fail before parsing', () => {
    const cases: [string, RegExp][] = [
      [xml(machine + '<info name="a" value="b"/>'.repeat(140_000)), /more than 131072 elements/],
      [xml(`<object type="Machine" cpuset="0x1" ${Array.from({ length: 70 }, (_, i) => `a${i}="1"`).join(' ')}/>`), /an element has more than 64 attributes/],
      [xml(machine + `<info ${Array.from({ length: 60 }, (_, i) => `a${i}="1"`).join(' ')}/>`.repeat(20_000)), /the document has more than 1048576 attributes/],
      [xml(`<object type="Machine" cpuset="${'0x1,'.repeat(12_000_000)}0x1"/>`), /a tag of more than 1048576 characters/],
      [xml(machine + 'x'.repeat(2 << 20)), /a text of more than 1048576 characters/],
    ];
    for (const [text, detail] of cases) {
      const started = performance.now();
      const e = thrown(() => parseHwlocXml(text, 'big.xml'), 'ETOPOLOGY');
      expect(e.message).toMatch(/^ETOPOLOGY: big\.xml:\d+:\d+: /);
      expect(e.message).toMatch(detail);
      expect(performance.now() - started).toBeLessThan(CALL_LIMIT_MS);
    }
  });
});

describe('configuration YAML', () => {
  it('an alias bomb is ECONFIG naming the file, the line and the limit', () => {
    const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 10; i++)
      lines.push(
        `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(9)
          .fill(`*${String.fromCharCode(96 + i)}`)
          .join(',')}]`,
      );
    const path = file('bomb.yaml', lines.join('\n') + '\n');
    const outcome = inChild(['config/load.js'], `m0.loadConfigFile(${JSON.stringify(path)})`);
    expectBoundedFailure(outcome, 'ECONFIG', /bomb\.yaml:2:8: aliases copy more than 100 nodes/);
  });

  it('deep nesting and too many tokens are ECONFIG before the YAML parser runs', () => {
    const path = file('deep.yaml', `levels: ${'['.repeat(200_000)}${']'.repeat(200_000)}\n`);
    expectBoundedFailure(
      inChild(['config/load.js'], `m0.loadConfigFile(${JSON.stringify(path)})`),
      'ECONFIG',
      /deep\.yaml:1:\d+: the file has more than 8192 YAML tokens/,
    );
    const keys = file('keys.yaml', Array.from({ length: 100_000 }, (_, i) => `k${i}: 1`).join('\n'));
    expectBoundedFailure(
      inChild(['config/load.js'], `m0.loadConfigFile(${JSON.stringify(keys)})`),
      'ECONFIG',
      /keys\.yaml:2731:\d+: the file has more than 8192 YAML tokens/,
    );
    const e = thrown(() => parseConfig(`${'- '.repeat(70)}x\n`, 'seq.yaml'), 'ECONFIG');
    expect(e.message).toMatch(/^ECONFIG: seq\.yaml:1:\d+: collections nest more than 64 deep/);
  });

  it('any other YAML error stays ECONFIG with file and line', () => {
    expect(thrown(() => parseConfig('a: [\n', 'bad.yaml'), 'ECONFIG').message).toMatch(/^ECONFIG: bad\.yaml:2:1: invalid YAML/);
  });
});

describe('network structure', () => {
  const chain = (depth: number, reversed: boolean): string => {
    const lines = ['SwitchName=s0 Nodes=n1', ...Array.from({ length: depth - 1 }, (_, i) => `SwitchName=s${i + 1} Switches=s${i}`)];
    return (reversed ? lines.reverse() : lines).join('\n') + '\n';
  };

  it('a 200 000-deep Switches= chain is ETOPOLOGY, not a RangeError', () => {
    for (const reversed of [false, true]) {
      const path = file('chain.conf', chain(200_000, reversed));
      const outcome = inChild(['topology/network/network-file.js'], `m0.readNetworkFile(${JSON.stringify(path)})`);
      expectBoundedFailure(outcome, 'ETOPOLOGY', /chain\.conf:65537: switch s\d+ takes the file past 65536 switches, the limit for one network/);
    }
  });

  it('a chain deeper than 64 levels names the switch, in either order', () => {
    for (const reversed of [false, true]) {
      const e = thrown(() => parseNetworkFile(chain(20_000, reversed), 'chain.conf'), 'ETOPOLOGY');
      expect(e.message).toMatch(/^ETOPOLOGY: chain\.conf:\d+: switch s\d+ is more than 64 levels above its nodes, the limit for one network/);
    }
    expect(parseNetworkFile(chain(64, false), 'ok.conf').levels).toBe(64);
    expect(thrown(() => parseNetworkFile(chain(65, true), 'deep.conf'), 'ETOPOLOGY').message).toContain('deep.conf:1: switch s64 is more than 64 levels');
  });

  it('a simple-file line of 200 000 switches is refused at 64 levels', () => {
    const e = thrown(() => parseNetworkFile(`n1 ${Array.from({ length: 200_000 }, (_, i) => `s${i}`).join(' ')}\n`, 'wide.txt'), 'ETOPOLOGY');
    expect(e.message).toMatch(/^ETOPOLOGY: wide\.txt:1: the path on line 1 has more than 64 switch levels/);
  });
});
