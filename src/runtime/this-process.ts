import { loadConfigFile, resolveConfig, validateConfig } from '../config/load.js';
import type { TopocollConfig, TopocollConfigInput } from '../config/schema.js';
import { readProcessAffinity } from '../topology/affinity.js';
import { discoverMachine } from '../topology/discover.js';
import { formatLocality } from '../topology/locality-string.js';
import { computeLocality } from '../topology/process-locality.js';
import type { JobEnvironment } from './environment.js';
import { numaNodeOf } from './numa-residency.js';

/** The configuration a job runs with: given in code or as a file, the launcher's file, or TOPOCOLL_CONFIG and the defaults. */
export function configFor(given: string | TopocollConfigInput | undefined, job: JobEnvironment, env: NodeJS.ProcessEnv): TopocollConfig {
  if (given !== undefined && typeof given !== 'string') return validateConfig(given, 'init({ config })');
  if (typeof given === 'string') return loadConfigFile(given);
  if (job.configFile !== undefined) return loadConfigFile(job.configFile);
  return resolveConfig(undefined, env);
}

/** This process's locality string, and the NUMA node its memory should be on when it has one. */
export function whereThisProcessRuns(config: TopocollConfig, env: NodeJS.ProcessEnv): { locality: string; cpus: number[]; numaNode?: number } {
  const machine = discoverMachine({ hwlocXml: config.topology.hwlocXml ?? undefined, env, source: config.topology.source });
  const cpus = readProcessAffinity();
  return { locality: formatLocality(computeLocality(machine, cpus).locality), cpus, numaNode: numaNodeOf(machine.objects.numa, cpus) };
}
