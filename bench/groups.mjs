#!/usr/bin/env node
// Times building every group of a large job and records peak memory.
//
//   node bench/groups.mjs                 # 100,000 and 1,000,000 ranks, one child process each
//   node bench/groups.mjs --nodes 10000   # one size, in this process
//
// The job: N nodes × 100 ranks bound to cores (2 sockets × 2 NUMA nodes × 25 cores, one L3 per
// NUMA node), three switch levels (20 nodes per leaf, 10 leaves per level-2 switch, 10 of those
// per level-3 switch, world above). Inputs (locality strings, network file text) are generated
// first and timed apart from planning, which includes parsing them. Each size runs in its own
// process so the peak RSS (VmHWM) is that size's alone.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseNetworkFile, planGroups } from '../dist/index.js';

const RANKS_PER_NODE = 100;
const args = process.argv.slice(2);
const nodesArg = args.indexOf('--nodes');

if (nodesArg < 0) {
  const rows = [];
  for (const nodes of [1000, 2500, 10000]) {
    const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--nodes', String(nodes)], { encoding: 'utf8' });
    rows.push(JSON.parse(out));
  }
  console.log('| ranks | nodes | levels | groups | planning (s) | ns per rank×level | peak RSS (MiB) |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.ranks.toLocaleString('en')} | ${r.nodes.toLocaleString('en')} | ${r.levels} | ${r.groups.toLocaleString('en')} | ${r.planSeconds.toFixed(2)} | ${r.nsPerRankLevel.toFixed(0)} | ${r.peakRssMiB.toFixed(0)} |`,
    );
  }
  const small = rows[0];
  const large = rows[rows.length - 1];
  const work = (r) => r.ranks * r.levels;
  console.log(`\nscaling: ${(work(large) / work(small)).toFixed(1)}× the ranks × levels took ${(large.planSeconds / small.planSeconds).toFixed(1)}× the time`);
} else {
  const nodes = Number(args[nodesArg + 1]);
  const pad = (n) => String(n).padStart(5, '0');
  const locality = Array.from({ length: RANKS_PER_NODE }, (_, c) => {
    const numa = Math.floor(c / 25);
    return `SK${Math.floor(c / 50)}:L3${numa}:L2${c}:L1${c}:CR${c}:HT${c}:NM${numa}`;
  });
  const placements = [];
  const lines = [];
  for (let n = 0; n < nodes; n++) {
    const node = `n${pad(n)}`;
    const leaf = Math.floor(n / 20);
    lines.push(`${node} leaf${leaf} agg${Math.floor(leaf / 10)} core${Math.floor(leaf / 100)}`);
    for (let j = 0; j < RANKS_PER_NODE; j++) placements.push({ rank: n * RANKS_PER_NODE + j, node, locality: locality[j] });
  }
  const networkText = lines.join('\n');

  // Best of three, so the figure is planning and not the JIT warming up.
  let plan;
  let planSeconds = Infinity;
  for (let i = 0; i < 3; i++) {
    const start = process.hrtime.bigint();
    const network = parseNetworkFile(networkText, 'bench-network.txt');
    plan = planGroups(placements, { network });
    planSeconds = Math.min(planSeconds, Number(process.hrtime.bigint() - start) / 1e9);
  }

  let groups = 0;
  for (const list of plan.groups.values()) groups += list.length;
  // Touch every rank's chain once, as a runtime building its schedule would.
  let chainLength = 0;
  for (let r = 0; r < plan.size; r += 1) chainLength += plan.chain(r).length;
  const peakKiB = Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
  process.stdout.write(
    JSON.stringify({
      ranks: plan.size,
      nodes,
      levels: plan.levels.length,
      levelNames: plan.levels,
      groups,
      chainLength,
      planSeconds,
      nsPerRankLevel: (planSeconds * 1e9) / (plan.size * plan.levels.length),
      peakRssMiB: peakKiB / 1024,
    }),
  );
}
