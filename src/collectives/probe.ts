import { encodeSchedule, type Step } from '../algorithms/schedule.js';
import { NativeCollective, type NativeCall } from '../native.js';
import { datatypeOf, reduceOpCode } from '../runtime/datatypes.js';
import { CallTag, type CallContext } from './call-context.js';

/** runProbe's second phase. */
const NO_STEPS: Step[] = [];

/**
 * `topocoll tune`'s probes: hand-made schedules run as one call each (Communicator.runProbe).
 * Each schedule is registered once per array, and once per distinct content.
 */
export class Probes {
  /** Native ids of the schedules given, by their encoded words and by the arrays themselves. */
  private readonly byWords = new Map<string, number>();
  private readonly byArray = new WeakMap<Step[], number>();

  constructor(private readonly register: (encoded: Int32Array) => number) {}

  /** See Communicator.runProbe. */
  run(ctx: CallContext, steps: Step[], buffer: Float64Array | undefined, segment: number): void {
    ctx.ensureOpen();
    const p = { reduce: this.id(steps), bcast: this.id(NO_STEPS), segment: buffer === undefined ? 0 : segment };
    let call: NativeCall;
    if (buffer === undefined) {
      call = ctx.nativeCall(NativeCollective.barrier, p, null, null, 0, 1, 0, 0);
    } else {
      const type = datatypeOf(buffer, 'runProbe');
      call = ctx.nativeCall(NativeCollective.allreduce, p, buffer, buffer, buffer.length, type.code, reduceOpCode('sum', type), 0);
    }
    call.planHash = ctx.tagged(CallTag.probe);
    ctx.engine.run(call);
  }

  private id(steps: Step[]): number {
    let id = this.byArray.get(steps);
    if (id !== undefined) return id;
    const encoded = encodeSchedule({ collective: 'reduce', root: 0, steps });
    const key = encoded.join(',');
    id = this.byWords.get(key);
    if (id === undefined) this.byWords.set(key, (id = this.register(encoded)));
    this.byArray.set(steps, id);
    return id;
  }
}
