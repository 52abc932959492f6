import { describe, expect, it } from 'vitest';
import { configFile, expectCaseOk, jobScript, leftoverSegments, runFailureJob, runJob, runJobOverSocketLayer, sharedJob } from '../helpers/jobs.js';

/**
 * Point-to-point messages (sendSync/recvSync/sendrecv, Promise twins, isend/irecv, objects) in
 * jobs started by `topocoll run`: test/jobs/messages.mjs runs every case in one job per
 * placement — ping-pong 0 B … 4 MiB, a ring of sendrecv and wildcard receives, truncation,
 * objects and bad arguments, messages interleaved with collectives and collective requests
 * (isend then allreduce against allreduce then recv), dup and split keeping their messages
 * apart, and two seeded storms of random destinations, tags and sizes up to 4 MiB checked for
 * MPI's order and for content against the senders' own data. With `--faults` it times a receive
 * out, closes a receiver with a request pending and messages unreceived, and kills a sender.
 */
const job = jobScript('messages.mjs');

const CASES = [
  'ping-pong 0 B … 4 MiB, Sync, Promise and requests',
  'sendrecv around a ring, wildcard receives',
  'truncation: ETRUNCATE on the receiver, message consumed, sender unaffected',
  'objects; uncloneable values and bad arguments refused before anything is sent',
  'interleaved with collectives and collective requests (isend then allreduce / allreduce then recv)',
  'dup and split keep their messages apart',
  'seeded storms: random destinations, tags and sizes 0 … 4 MiB, specific and wildcard receives, order and content',
];

describe.each([
  ['one node, 4 ranks', ['-n', '4']],
  ['2 emulated nodes, 4 ranks (TCP between them)', ['-n', '4', '--nodes', '2']],
  ['3 emulated nodes, 5 ranks', ['-n', '5', '--nodes', '3']],
] as const)('messages on %s', (_, args) => {
  const ranks = Number(args[1]);
  const result = sharedJob(() => runJob([...args, job], 120_000));
  for (const [k, name] of CASES.entries()) {
    it(name, () => {
      expectCaseOk(result(), k + 1, ranks);
    });
  }
  it('the job ends cleanly', async () => {
    const r = result();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/never received/);
    expect(await leftoverSegments()).toEqual([]);
  });
});

describe('messages over a JavaScript layer (createCommunicator) on 2 emulated nodes, 4 ranks', () => {
  const result = sharedJob(() => runJobOverSocketLayer(['-n', '4', '--nodes', '2', job, '--layer', 'socket'], 120_000));
  for (const [k, name] of [
    'ping-pong 0 B … 4 MiB, Promise and requests (test() polled with the event loop free)',
    'blocking forms and wait() refused with EINVAL; sendrecv, objects, truncation, isend beside allreduce and a dup, as Promises',
    'the seeded storms with Promise receives',
  ].entries()) {
    it(name, () => {
      expectCaseOk(result(), k + 1, 4);
    });
  }
  it('the job ends cleanly', async () => {
    expect(result().status, result().stderr).toBe(0);
    expect(await leftoverSegments()).toEqual([]);
  });
});

describe.each([
  ['one node', ['-n', '4']],
  ['2 emulated nodes', ['-n', '4', '--nodes', '2']],
] as const)('messages that go wrong on %s', (_, args) => {
  const result = sharedJob(() => runFailureJob(['--config', configFile('timeouts:\n  collectiveMs: 2000\n'), ...args, job, '--faults']));
  const said = (rank: number) =>
    result()
      .stdout.split('\n')
      .filter((l) => l.startsWith(`rank ${rank} caught `));

  it('a receive nothing matches ends with ETIMEDOUT after timeouts.collectiveMs, naming the source and tag', () => {
    expect(said(0)[3], result().stdout).toMatch(/^rank 0 caught ETIMEDOUT: .*no message from rank 1 with tag 42 .*2000 ms/);
  });

  it('close() ends a pending irecv with ECLOSED and reports the messages never received, per source', () => {
    expect(said(2), result().stdout).toEqual([expect.stringMatching(/^rank 2 caught ECLOSED: /)]);
    expect(result().stderr).toMatch(/rank 2: close\(\) with 4 messages never received \(from rank 0: 4\)/);
  });

  it('a receive from a rank that closed its communicator ends with EPEERLOST', () => {
    expect(said(0)[0], result().stdout).toMatch(/^rank 0 caught EPEERLOST: .*rank 2 closed the communicator/);
  });

  it('a killed sender: pending and new receives from it end with EPEERLOST, also on a rank that never had a stream from it', () => {
    expect(said(0).slice(1, 3), result().stdout).toEqual([
      expect.stringMatching(/^rank 0 caught EPEERLOST: .*receive from rank 3 with tag 9: rank 3 is gone/),
      expect.stringMatching(/^rank 0 caught EPEERLOST: .*receive from rank 3 with tag 8: rank 3 is gone/),
    ]);
    expect(said(1), result().stdout).toEqual([expect.stringMatching(/^rank 1 caught EPEERLOST: .*receive from rank 3 with tag 1: rank 3 is gone/)]);
    expect(result().finished.sort(), result().stderr).toEqual([0, 1, 2]);
    expect(result().signal).toBeNull();
  });

  it('nothing is left behind', async () => {
    result();
    expect(await leftoverSegments()).toEqual([]);
  });
});
