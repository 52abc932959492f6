import { readFileSync } from 'node:fs';
import { parseIndexList } from '../topology/index-list.js';

/**
 * Which ranks of a node take turns on this rank's CPUs. A rank waiting on such a peer gains
 * nothing by spinning: the peer is most likely not running, and it cannot run on these CPUs
 * until the waiter gives them up. The engine yields at once on waits for them: spinning only
 * delays the peer.
 */

/** @param cpusByRank the allowed CPUs of each rank of this node, ascending. */
export function coRunnersOf(me: number, cpusByRank: ReadonlyMap<number, readonly number[]>): number[] {
  const mine = cpusByRank.get(me);
  if (mine === undefined) return [];
  const key = mine.join(',');
  const sharing = [...cpusByRank].filter(([, cpus]) => cpus.join(',') === key).map(([rank]) => rank);
  // The chance that a given other rank bound there is running: (CPUs − 1) of the others.
  const others = sharing.length - 1;
  if (others === 0 || (mine.length - 1) / others >= 0.5) return [];
  return sharing.filter((rank) => rank !== me);
}

/**
 * Whether the ranks of a machine (machineOf: one kernel, whatever hosts it is made into) outnumber
 * the CPUs they may run on: the machine's CPUs, or fewer when every one of its ranks is bound —
 * two ranks bound to one core take turns on it as surely as three unbound ranks on two cores.
 * Every rank computes the same from the same sets.
 * @param cpusOfHostRanks the allowed CPUs of each rank of the machine (an empty list: unknown).
 */
export function hostOversubscribed(cpusOfHostRanks: readonly (readonly number[])[], hostCpus: number): boolean {
  if (cpusOfHostRanks.length > hostCpus) return true;
  if (cpusOfHostRanks.some((cpus) => cpus.length === 0)) return false;
  return cpusOfHostRanks.length > new Set(cpusOfHostRanks.flat()).size;
}

/**
 * The kernel this process runs on (/proc/sys/kernel/random/boot_id): the same in every container,
 * network namespace or emulated host of one machine, which share its CPUs whatever their host
 * names, networks and /dev/shm say; another on another machine or after a reboot. '' where it
 * cannot be read.
 */
export function kernelId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** The machine whose CPUs a rank runs on: ranks with the same one share those CPUs (its kernel, else its host name). */
export function machineOf(info: { host: string; kernel?: string }): string {
  return info.kernel !== undefined && info.kernel !== '' ? `kernel ${info.kernel}` : `host ${info.host}`;
}

/**
 * Whether the ranks on rank `me`'s machine (machineOf) outnumber its CPUs (hostOversubscribed):
 * emulated nodes and hosts made of namespaces share one machine's CPUs.
 * @param infos every rank's host, kernel and allowed CPUs (an index list); `machineCpus`: the machine's CPUs.
 */
export function machineOversubscribed(me: number, infos: readonly { host: string; kernel?: string; cpus: string }[], machineCpus: number): boolean {
  return hostOversubscribed(
    onMachineOf(me, infos).map((i) => parseIndexList(i.cpus)),
    machineCpus,
  );
}

/** A node's figures the cost model prices its groups with (selection.ts, NodeFacts.nodes). */
export interface NodeFigures {
  /** CPUs of the node's machine. */
  cores: number;
  /** More ranks on that machine than CPUs (machineOversubscribed). */
  oversubscribed: boolean;
}

/**
 * Every node's figures, from what every rank knows alike (the ranks' infos): so a group of
 * another node is priced the same on every rank, whatever this rank's own machine. A node's are
 * its first rank's machine's: its CPU count (`machineCpus`, else `fallbackCpus`) and whether that
 * machine's ranks outnumber them.
 */
export function nodeFactsOf(
  infos: readonly { node: string; host: string; kernel?: string; cpus: string; machineCpus?: number }[],
  fallbackCpus: number,
): Map<string, NodeFigures> {
  const facts = new Map<string, NodeFigures>();
  infos.forEach((info, r) => {
    if (facts.has(info.node)) return;
    const cores = Math.max(1, info.machineCpus ?? fallbackCpus);
    facts.set(info.node, { cores, oversubscribed: machineOversubscribed(r, infos, cores) });
  });
  return facts;
}

/** The ranks' infos on rank `me`'s machine (machineOf: its kernel, else its host), `me`'s included. */
export function onMachineOf<T extends { host: string; kernel?: string }>(me: number, infos: readonly T[]): T[] {
  const machine = machineOf(infos[me]!);
  return infos.filter((i) => machineOf(i) === machine);
}
