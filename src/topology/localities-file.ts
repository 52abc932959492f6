import { TopocollError } from '../errors.js';
import type { RankPlacement } from '../groups/plan.js';
import { parseLocality } from './locality-string.js';
import { readTextFile } from '../util/read-text-file.js';

/**
 * The localities file: where every rank of a job runs, one line per rank,
 * `<rank> <node> <locality>`, `#` comments. `-` as locality means "not known" (e.g. an unbound
 * process). `topocoll localities` writes it; `topocoll groups --localities` reads it.
 */

export function formatLocalitiesFile(placements: readonly RankPlacement[]): string {
  const lines = ['# <rank> <node> <locality>'];
  for (const p of placements) lines.push(`${p.rank} ${p.node} ${p.locality === undefined || p.locality === '' ? '-' : p.locality}`);
  return lines.join('\n') + '\n';
}

export function parseLocalitiesFile(text: string, file: string): RankPlacement[] {
  const placements: RankPlacement[] = [];
  const lineOfRank = new Map<number, number>();
  const checked = new Set<string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = i + 1;
    const content = lines[i]!.replace(/#.*/, '').trim();
    if (content === '') continue;
    const fields = content.split(/\s+/);
    if (fields.length !== 3) {
      throw new TopocollError('ETOPOLOGY', `expected "<rank> <node> <locality>", found ${fields.length} field(s)`, {
        file,
        line,
        hint: 'Write one rank per line, e.g. "0 node01 SK0:L30:L20:L10:CR0:HT0:NM0" ("-" when the locality is unknown).',
      });
    }
    const [rankText, node, locality] = fields as [string, string, string];
    if (!/^(0|[1-9][0-9]*)$/.test(rankText)) {
      throw new TopocollError('ETOPOLOGY', `"${rankText}" is not a rank number`, { file, line });
    }
    const rank = Number(rankText);
    const first = lineOfRank.get(rank);
    if (first !== undefined) {
      throw new TopocollError('ETOPOLOGY', `rank ${rank} appears twice (first on line ${first})`, { file, line, rank });
    }
    lineOfRank.set(rank, line);
    if (locality !== '-' && !checked.has(locality)) {
      parseLocality(locality, { file, line, rank });
      checked.add(locality);
    }
    placements.push({ rank, node, locality: locality === '-' ? '' : locality });
  }
  const missing: number[] = [];
  for (let r = 0; r < placements.length && missing.length < 10; r++) if (!lineOfRank.has(r)) missing.push(r);
  if (missing.length > 0) {
    throw new TopocollError('ETOPOLOGY', `rank(s) ${missing.join(', ')} missing: ${placements.length} lines must name ranks 0…${placements.length - 1}`, {
      file,
      hint: 'Every rank of the job needs exactly one line.',
    });
  }
  if (placements.length === 0) throw new TopocollError('ETOPOLOGY', 'the file names no rank', { file });
  return placements.sort((a, b) => a.rank - b.rank);
}

export function readLocalitiesFile(path: string): RankPlacement[] {
  return parseLocalitiesFile(readTextFile(path, 'ETOPOLOGY', 'localities file'), path);
}
