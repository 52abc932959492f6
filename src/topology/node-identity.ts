import { hostname } from 'node:os';
import { TopocollError } from '../errors.js';

/**
 * The name a process gives its compute node. Node names must match the network file, and a
 * mismatch (FQDN vs short name, Slurm's NodeName vs the host name) is the likeliest
 * configuration error, so the rule is configurable (`node.identity`):
 * `auto` — SLURMD_NODENAME under Slurm, else the short host name; `short-hostname`;
 * `hostname`; `slurm`; `env:VAR`; `name:LITERAL`.
 */
export function resolveNodeIdentity(setting: string, env: NodeJS.ProcessEnv = process.env, host: string = hostname()): string {
  const short = host.split('.')[0] || host;
  if (setting === 'auto') return env.SLURMD_NODENAME || short;
  if (setting === 'short-hostname') return short;
  if (setting === 'hostname') return host;
  if (setting === 'slurm') return requireEnv('SLURMD_NODENAME', env, setting);
  if (setting.startsWith('env:')) return requireEnv(setting.slice(4), env, setting);
  if (setting.startsWith('name:') && setting.length > 5) return setting.slice(5);
  throw new TopocollError('ECONFIG', `node.identity "${setting}" is not one of auto, short-hostname, hostname, slurm, env:VAR, name:LITERAL`);
}

function requireEnv(name: string, env: NodeJS.ProcessEnv, setting: string): string {
  const value = env[name];
  if (value === undefined || value === '') {
    throw new TopocollError('ECONFIG', `node.identity is "${setting}" but ${name} is not set`, {
      hint: 'Set the variable, or choose another node.identity (e.g. short-hostname).',
    });
  }
  return value;
}
