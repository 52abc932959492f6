import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import { coveringSources } from '../algorithms/hierarchical.js';
import type { Group, GroupPlan } from '../groups/plan.js';
import { MAX_SUB_COMMUNICATORS_PER_LAYER, subCommunicatorTag } from '../p2p/point-to-point.js';
import type { RemoteDirectory } from './job-planner.js';
import {
  awaitSegmentMapped,
  finishJoin,
  linkAddress,
  bindForMessages,
  startJoin,
  type CommunicatorParts,
  type JoinOrigin,
  type Joining,
  type LinkOrigin,
} from './join.js';
import { createJobToken } from './rendezvous/protocol.js';
import { removeJobSegments, segmentName } from './segment-name.js';

/**
 * The split() color of `rank` for splitByLevel(`level`) over `plan` (the plan of every level,
 * switched on or off: the hardware's units, the same on every rank). A plan keeps groups of
 * leaders only (a level's group holds the leaders of the groups below it), so the rank's unit at
 * `level` is what the highest group covering it at `level` or below covers (coveringSources,
 * coveredBelow): the color is that group's index among the plan's groups, the same for every
 * rank it covers; a rank no such group covers is alone in its unit and gets a color of its own
 * after them. EINVAL for a level the plan does not have.
 */
export function levelColor(plan: GroupPlan, rank: number, level: string): number {
  const top = (plan.levels as readonly string[]).indexOf(level);
  if (top < 0) {
    throw new TopocollError('EINVAL', `splitByLevel: "${level}" is not a level of this job (${plan.levels.join(', ')})`, {
      rank,
      hint: 'Name a level that comm.levels() lists.',
    });
  }
  const all = [...plan.groups.values()].flat();
  let unit: Group | undefined;
  for (const g of coveringSources(plan, rank).keys()) {
    const at = plan.levels.indexOf(g.level);
    if (at <= top && (unit === undefined || at > plan.levels.indexOf(unit.level))) unit = g;
  }
  return unit === undefined ? all.length + rank : all.indexOf(unit);
}

/** What split() needs of the parent communicator: who it is, what it was joined from, and an allgather. */
export interface SplitParent {
  readonly rank: number;
  readonly size: number;
  readonly config: TopocollConfig;
  readonly numaNode?: number;
  readonly origin: JoinOrigin;
  /** An allgather of bytes over the parent (Promise form) that no other collective matches. */
  exchange(send: Uint8Array, recv: Uint8Array): Promise<void>;
}

/** Between short native waits: lets the event loop run (the parent's Promise calls, a JavaScript layer). */
const yieldToEventLoop = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Bytes each parent rank contributes to the setup's first exchange (SetupRecord). */
const RECORD_BYTES = 68;
/** Offset of the port of a member's message streams in its record. */
const MESSAGES_PORT_AT = 12;
/** Offset and room of a node leader's segment name in its record. */
const NAME_AT = 16;
const NAME_BYTES = RECORD_BYTES - NAME_AT;
/** A job token's hex characters (rendezvous/protocol.ts, createJobToken). */
const TOKEN_BYTES = 32;
/** Bytes each parent rank contributes to step 0: color, key, a token. */
const FIRST_BYTES = 8 + TOKEN_BYTES;

/**
 * Makes this rank's communicator of `split(color, key)` (MPI_Comm_split's semantics): the
 * parent's ranks with the same color, ordered by key, then by parent rank; no communicator for
 * an undefined color. Collective over the parent: every parent rank takes part in every step,
 * with or without a color, so all of them fail together — nobody waits on a rank that gave up.
 *
 * The steps, each followed by an exchange over the parent (an allgather in Promise form, so a
 * parent over a JavaScript layer works too, marked so that no other collective matches it):
 *   0. every rank's (color, key), and a fresh token of parent rank 0's (the new segments' names);
 *   1. each member makes its engine; node leaders create their node's segment (a new one: its
 *      size follows the sub-communicator's ranks); over TCP each member listens on a new port
 *      → exchanged: status, port, segment name, the layer's sub-communicator count;
 *   2. the other members of a node map its segment → exchanged: status;
 *   3. links to other nodes (new TCP connections, or the parent's host layer on a tag of the
 *      sub-communicator's own), plans, shared-memory groups → exchanged: status.
 * A failed step makes every rank close what it made and throw.
 */
export async function splitCommunicator(parent: SplitParent, color: number | undefined, key: number): Promise<CommunicatorParts | undefined> {
  const { rank, size, origin } = parent;
  if (color !== undefined && (!Number.isInteger(color) || color < 0 || color > 2 ** 31 - 1)) {
    throw new TopocollError('EINVAL', `split: color must be undefined or an integer in 0 … 2^31 − 1, got ${String(color)}`, { rank });
  }
  if (!Number.isInteger(key) || key < -(2 ** 31) || key > 2 ** 31 - 1) {
    throw new TopocollError('EINVAL', `split: key must be a 32-bit integer, got ${String(key)}`, { rank });
  }
  // Step 0: (color, key) and a token of every rank; rank 0's token is the one used.
  const first = new Uint8Array(FIRST_BYTES);
  new DataView(first.buffer).setInt32(0, color ?? -1, true);
  new DataView(first.buffer).setInt32(4, key, true);
  first.set(new TextEncoder().encode(createJobToken()), 8);
  const all = new Uint8Array(FIRST_BYTES * size);
  await parent.exchange(first, all);
  const colors = new Int32Array(2 * size);
  for (let r = 0; r < size; r++) colors.set(new Int32Array(all.buffer.slice(r * FIRST_BYTES, r * FIRST_BYTES + 8)), 2 * r);
  const tokenBytes = all.subarray(8, 8 + TOKEN_BYTES);

  // Every rank computes every sub-communicator: its members in order, from the same data.
  const members = Array.from({ length: size }, (_, r) => r)
    .filter((r) => color !== undefined && colors[2 * r] === color)
    .sort((a, b) => colors[2 * a + 1]! - colors[2 * b + 1]! || a - b);
  const childRank = members.indexOf(rank);
  const token = `${new TextDecoder().decode(tokenBytes)}:${color ?? ''}`;
  const infos = members.map((r) => origin.infos[r]!);

  const setup = new SplitSetup(parent);
  let joining: Joining | undefined;
  let parts: CommunicatorParts | undefined;
  let messages: ReturnType<typeof bindForMessages> | undefined;
  try {
    // Step 1.
    const record = new Uint8Array(RECORD_BYTES);
    const view = new DataView(record.buffer);
    const links = origin.links;
    view.setInt32(8, links.kind === 'p2p' ? links.subCommunicators.made : 0, true);
    await setup.step(() => {
      if (color === undefined) return;
      joining = startJoin(childRank, infos, parent.config);
      messages = bindForMessages(childRank, members.length, parent.config);
      view.setInt32(MESSAGES_PORT_AT, messages.port, true);
      const { engine, localRanks, nodes, nodeIndex } = joining;
      if (localRanks.length > 1 && localRanks[0] === childRank) {
        const name = segmentName(token, nodeIndex);
        const bytes = new TextEncoder().encode(name);
        if (bytes.length > NAME_BYTES) throw new TopocollError('EINVAL', `split: a segment name of ${bytes.length} bytes (at most ${NAME_BYTES})`, { rank });
        engine.createSegment(name);
        record.set(bytes, NAME_AT);
      }
      if (nodes.length > 1 && links.kind === 'tcp') view.setInt32(4, joining.engine.listenTcp(linkAddress(infos, childRank)), true);
    }, record);
    const records = setup.records!;
    const field = (r: number, at: number) => new DataView(records.buffer, r * RECORD_BYTES).getInt32(at, true);
    const slot = Math.max(...Array.from({ length: size }, (_, r) => field(r, 8)));
    if (links.kind === 'p2p') links.subCommunicators.made = slot + 1;

    // Step 2.
    await setup.step(() => {
      if (joining === undefined) return;
      const { engine, localRanks } = joining;
      if (localRanks.length < 2 || localRanks[0] === childRank) return;
      const leader = members[localRanks[0]!]!;
      const bytes = records.subarray(leader * RECORD_BYTES + NAME_AT, (leader + 1) * RECORD_BYTES);
      engine.openSegment(new TextDecoder().decode(bytes.subarray(0, bytes.indexOf(0) < 0 ? bytes.length : bytes.indexOf(0))));
    });

    // Step 3.
    await setup.step(async () => {
      if (joining === undefined) return;
      const j = joining;
      if (j.localRanks.length > 1 && j.localRanks[0] === childRank) {
        // At once: every member mapped it before step 2's exchange.
        await awaitSegmentMapped(j.engine, rank, j.nodes[j.nodeIndex]!, origin.timeoutMs, yieldToEventLoop, 'split: ');
      }
      const childLinks = linksOf(links, members);
      let remote: RemoteDirectory | undefined;
      if (j.nodes.length > 1) {
        if (childLinks.kind === 'tcp') {
          const addresses = members.map((r, cr) => ({ rank: cr, host: linkAddress(infos, cr), port: field(r, 4) }));
          remote = { token, addresses, timeoutMs: origin.timeoutMs };
        } else {
          if (slot >= MAX_SUB_COMMUNICATORS_PER_LAYER) {
            throw new TopocollError('EINVAL', `split: ${MAX_SUB_COMMUNICATORS_PER_LAYER} sub-communicators were made over this layer already`, { rank });
          }
          j.engine.useP2P(childLinks.layer, subCommunicatorTag(childLinks.layer.tagBase, slot), childLinks.layerRanks);
          if (childLinks.refuseBlocking !== undefined) j.engine.refuseBlocking(childLinks.refuseBlocking);
          remote = { p2p: true };
        }
      }
      const childOrigin: JoinOrigin = {
        infos: infos.map((info, cr) => ({ ...info, messagesPort: field(members[cr]!, MESSAGES_PORT_AT) })),
        network: origin.network,
        timeoutMs: origin.timeoutMs,
        links: childLinks,
        segmentToken: origin.segmentToken,
      };
      parts = await finishJoin(j, parent.config, parent.numaNode, remote, childOrigin, yieldToEventLoop);
      // Before the step's exchange, the last barrier: no member messages before every one listens.
      messages!.native.listen();
    });
    return parts === undefined ? undefined : { ...parts, messages: { native: messages!.native, token } };
  } catch (e) {
    messages?.native.close();
    (parts?.engine ?? joining?.engine)?.close();
    removeJobSegments(token);
    throw e;
  }
}

/** The sub-communicator's links: the parent's kind; over a layer, its ranks' layer ranks. */
function linksOf(links: LinkOrigin, members: readonly number[]): LinkOrigin {
  if (links.kind === 'tcp') return links;
  return { ...links, layerRanks: members.map((r) => links.layerRanks?.[r] ?? r) };
}

/**
 * The steps' exchanges: each rank runs its part of a step, then every parent rank sends the
 * outcome (a status byte first in its record) to every other through the parent's allgather.
 * A rank whose part failed rethrows its error; the others throw EPEERLOST naming it.
 */
class SplitSetup {
  /** Every rank's record of the last exchange, in parent rank order. */
  records?: Uint8Array;

  constructor(private readonly parent: SplitParent) {}

  async step(part: () => void | Promise<void>, record = new Uint8Array(RECORD_BYTES)): Promise<void> {
    let failure: Error | undefined;
    try {
      await part();
    } catch (e) {
      failure = e instanceof Error ? e : new Error(String(e));
    }
    record[0] = failure === undefined ? 0 : 1;
    const records = new Uint8Array(RECORD_BYTES * this.parent.size);
    await this.parent.exchange(record, records);
    this.records = records;
    if (failure !== undefined) throw failure;
    const failed = Array.from({ length: this.parent.size }, (_, r) => r).filter((r) => records[r * RECORD_BYTES] !== 0);
    if (failed.length > 0) {
      throw new TopocollError(
        'EPEERLOST',
        `split: rank${failed.length > 1 ? 's' : ''} ${failed.join(', ')} of the parent failed making the sub-communicator (see their output)`,
        {
          rank: this.parent.rank,
        },
      );
    }
  }
}
