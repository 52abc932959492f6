import { TopocollError } from '../errors.js';
import { StepKind, type BlockRange, type Step } from './schedule.js';

/**
 * One group as the group algorithms see it: positions 0 … n−1 over its ascending members. The
 * algorithms think in positions; the steps they write name global ranks.
 */
export interface GroupView {
  /** Global ranks by position, ascending. */
  members: readonly number[];
  /** Index into `plan.levels` of the group's level, written into every step. */
  level: number;
  /** How error messages name the group, e.g. `node group n1`; its members when absent. */
  label?: string;
}

function describeGroup(view: GroupView): string {
  return view.label ?? `the group of ranks ${view.members.join(', ')}`;
}

/**
 * The engine id of a group that runs a shared-memory step. Without one it is a configuration
 * error: choosing another algorithm on some ranks only would hang the group.
 */
export function requireShmGroup(view: GroupView, id: number | undefined): number {
  if (id !== undefined) return id;
  throw new TopocollError('ECONFIG', `shm chosen for ${describeGroup(view)}, which is not registered with the shared-memory engine`, {
    hint: 'Choose shm only for levels inside one node, with the shared-memory engine enabled.',
  });
}

/**
 * Blocks [first, first + count) of `of`; undefined for the whole segment, which is how steps
 * write it (so a schedule reads the same before and after an encode/decode round trip).
 */
export function blocks(first: number, count: number, of: number): BlockRange | undefined {
  return first === 0 && count === of ? undefined : { first, count, of };
}

/** 0 = B op X when the incoming X covers higher positions than B, 1 = X op B when lower. */
export function orderFor(incomingIsLower: boolean): 0 | 1 {
  return incomingIsLower ? 1 : 0;
}

/** A group of n members whose global ranks are their positions 0 … n−1 (for counting a schedule's steps or distances apart from any plan). */
export function positionView(n: number): GroupView {
  return { members: Array.from({ length: n }, (_, i) => i), level: 0 };
}

/** Writes one rank's steps inside one group, peers given by position. */
export class GroupStepWriter {
  readonly steps: Step[] = [];

  constructor(private readonly view: GroupView) {}

  send(to: number, range?: BlockRange): void {
    this.push({ kind: StepKind.Send, peer: this.rank(to), level: this.view.level }, range);
  }

  recv(from: number, range?: BlockRange): void {
    this.push({ kind: StepKind.Recv, peer: this.rank(from), level: this.view.level }, range);
  }

  recvReduce(from: number, order: 0 | 1, range?: BlockRange): void {
    this.push({ kind: StepKind.RecvReduce, peer: this.rank(from), level: this.view.level, order }, range);
  }

  /** Send B[range] to `to`, then receive `range2` (blocks of `range.of`) from `from`. */
  sendRecv(to: number, range: BlockRange | undefined, from: number, range2: { first: number; count: number }): void {
    this.push({ kind: StepKind.SendRecv, peer: this.rank(to), level: this.view.level, peer2: this.rank(from), range2 }, range);
  }

  /** Send B[range] to `to`, then receive X from `from` and combine it into `range2`. */
  sendRecvReduce(to: number, range: BlockRange | undefined, from: number, range2: { first: number; count: number }, order: 0 | 1): void {
    this.push({ kind: StepKind.SendRecvReduce, peer: this.rank(to), level: this.view.level, peer2: this.rank(from), range2, order }, range);
  }

  shmBcast(source: number, group: number): void {
    this.steps.push({ kind: StepKind.ShmBcast, peer: this.rank(source), level: this.view.level, group });
  }

  shmReduce(destination: number, group: number): void {
    this.steps.push({ kind: StepKind.ShmReduce, peer: this.rank(destination), level: this.view.level, group });
  }

  private push(step: Step, range: BlockRange | undefined): void {
    if (range !== undefined) step.range = range;
    this.steps.push(step);
  }

  private rank(position: number): number {
    const r = this.view.members[position];
    if (r === undefined) throw new TopocollError('EINVAL', `group position ${position} is outside 0…${this.view.members.length - 1}`);
    return r;
  }
}

/** Checks that `position` (named `what`) is a position of a group of n members. */
export function checkPosition(n: number, position: number, what: string): void {
  if (!Number.isInteger(position) || position < 0 || position >= n) {
    throw new TopocollError('EINVAL', `${what} position ${position} is outside 0…${n - 1}`);
  }
}
