import { TopocollError } from '../errors.js';
import type { RankPlacement } from './types.js';
import { parseLocality } from './locality-string.js';
import { readTextFile } from '../util/read-text-file.js';
import { lines } from '../util/lines.js';
import { excerpt } from '../util/quote.js';
import { MAX_HOST_NAME_LENGTH } from './network/hostlist.js';

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
  // Ranks are bounded by the lines a file may have (MAX_INPUT_LINES), which lines() enforces.
  for (const [raw, line] of lines(text, file)) {
    const hash = raw.indexOf('#');
    const content = (hash >= 0 ? raw.slice(0, hash) : raw).trim();
    if (content === '') continue;
    const fields = content.split(/\s+/, 4);
    if (fields.length !== 3) {
      const found = fields.length > 3 ? 'more than 3 fields' : `${fields.length} field(s)`;
      throw new TopocollError('ETOPOLOGY', `expected "<rank> <node> <locality>", found ${found}`, {
        file,
        line,
        hint: 'Write one rank per line, e.g. "0 node01 SK0:L30:L20:L10:CR0:HT0:NM0" ("-" when the locality is unknown).',
      });
    }
    const [rankText, node, locality] = fields as [string, string, string];
    if (!/^(0|[1-9][0-9]{0,8})$/.test(rankText)) {
      throw new TopocollError('ETOPOLOGY', `"${excerpt(rankText)}" is not a rank number`, { file, line });
    }
    const rank = Number(rankText);
    if (node.length > MAX_HOST_NAME_LENGTH) {
      throw new TopocollError('ETOPOLOGY', `node name "${excerpt(node)}" is longer than ${MAX_HOST_NAME_LENGTH} characters`, { file, line, rank });
    }
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
