// @ts-check
// A rank of the splitByLevel test: splits its communicator by every level comm.levels() lists,
// bottom-up, and checks each result against what it knows itself: at `node` the ranks whose
// comm.node is its own (gathered over the parent), at `world` every rank; below the node only
// ranks of its node; every unit inside the next level's; the parent's order; members that agree
// on who they are. Then a level the job does not have must be EINVAL before anything is sent.
// Prints `rank R ok N` or throws.
import { init } from 'topocoll';

const comm = await init();
const { rank, size } = comm;
let checks = 0;
const check = (/** @type {string} */ what, /** @type {boolean} */ ok) => {
  checks++;
  if (!ok) throw new Error(`rank ${rank}: ${what}`);
};

// Every rank's node, as a number: the index of its name among the sorted distinct names.
const mine = new TextEncoder().encode(comm.node.padEnd(32, ' ').slice(0, 32));
const gathered = new Uint8Array(32 * size);
comm.allgatherSync(mine, gathered);
const nodeOf = Array.from({ length: size }, (_, r) => new TextDecoder().decode(gathered.subarray(32 * r, 32 * r + 32)));

const sameNode = nodeOf.flatMap((n, r) => (n === nodeOf[rank] ? [r] : []));
const names = comm.levels().map((l) => l.name);
/** @type {number[]} */
let below = [rank];
for (const level of comm.levels()) {
  const sub = await comm.splitByLevel(level.name);
  // Who the members are, by parent rank, in the sub-communicator's order.
  const parents = new Int32Array(sub.size);
  sub.allgatherSync(Int32Array.of(rank), parents);
  const members = Array.from(parents);
  check(
    `${level.name}: members ${members} are not in the parent's order`,
    members.every((r, i) => i === 0 || r > /** @type {number} */ (members[i - 1])),
  );
  check(`${level.name}: this rank is not at its place`, members[sub.rank] === rank);
  check(
    `${level.name}: members ${members} do not hold the unit below (${below})`,
    below.every((r) => members.includes(r)),
  );
  below = members;
  if (names.indexOf(level.name) < names.indexOf('node'))
    check(
      `${level.name}: members ${members} beyond the node`,
      members.every((r) => sameNode.includes(r)),
    );
  if (level.name === 'node') check(`node: members ${members}`, members.join() === sameNode.join());
  if (level.name === 'world') check(`world: members ${members}`, sub.size === size);
  // Every member agrees on the list.
  const sum = new Float64Array(1);
  sub.allreduceSync(Float64Array.of(members.reduce((a, r) => a * 31 + r + 1, 7)), sum, 'sum');
  check(`${level.name}: the members disagree on who they are`, sum[0] === sub.size * members.reduce((a, r) => a * 31 + r + 1, 7));
  sub.close();
}
let code;
try {
  await comm.splitByLevel('l9');
} catch (e) {
  code = /** @type {any} */ (e).code;
}
check(`splitByLevel('l9') gave ${code}`, code === 'EINVAL');
comm.barrierSync();
console.log(`rank ${rank} ok ${checks}`);
comm.close();
