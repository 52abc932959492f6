/**
 * The command line a remote-shell agent is given, as `ssh` takes it: `[options] [user@]host
 * [command words…]`. Open MPI's rsh launcher and MPICH's Hydra (`-launcher ssh`) call the agent
 * this way and may pass ssh options (Hydra passes `-x`); the words are meant for the remote
 * user's shell, so they are joined with spaces and run by `sh -c`, as sshd does.
 */
import { TopocollError } from '../errors.js';

/** ssh options that take a value (OpenSSH 9): the value is the rest of the word or the next word. */
const WITH_VALUE = new Set('BbcDEeFIiJLlmOoPpQRSWw');

export interface RshCall {
  host: string;
  /** The command for `sh -c`; empty when none was given (an interactive login, which an agent cannot give). */
  command: string;
}

export function parseRshArgs(argv: readonly string[]): RshCall {
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      i++;
      break;
    }
    if (!a.startsWith('-') || a === '-') break;
    // A cluster of flags (-xT); the first letter that takes a value takes the rest or the next word.
    for (let j = 1; j < a.length; j++) {
      if (WITH_VALUE.has(a[j]!)) {
        if (j === a.length - 1) i++;
        break;
      }
    }
  }
  const target = argv[i];
  if (target === undefined)
    throw new TopocollError('EINVAL', 'cluster agent: no host given', { hint: 'The agent is called as: agent [ssh options] host command…' });
  const host = target.slice(target.lastIndexOf('@') + 1);
  return { host, command: argv.slice(i + 1).join(' ') };
}
