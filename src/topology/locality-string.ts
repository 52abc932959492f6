import { TopocollError, type ErrorLocation } from '../errors.js';
import { formatIndexList, scanIndexList } from './index-list.js';
import { quote } from '../util/quote.js';
import type { Locality, LocalityCode, LocalityToken } from './types.js';

/**
 * PMIx locality strings (`SK0:L30:L20,2:L10,2:CR0,2:HT0,4:NM0`), the form in which ranks
 * exchange where they run. A token is a two-letter code followed by hwloc logical indices in
 * list syntax; the code is exactly the first two characters, as in Open MPI's reader, so
 * `L216-23` is L2 indices 16–23. The planner parses up to a million of these, so the parser
 * reads tokens in place instead of splitting the string.
 */

/** Bit of each code in the duplicate-detection mask. */
const CODE_BIT: Readonly<Record<string, number>> = { SK: 1, L3: 2, L2: 4, L1: 8, CR: 16, HT: 32, NM: 64 };

/**
 * Parses a locality string. Every malformation (unknown or repeated code, missing or bad
 * index list, empty token) is an ETOPOLOGY error naming the token; `where` says where the
 * string came from.
 */
export function parseLocality(text: string, where: ErrorLocation = {}): Locality {
  if (text === '') throw new TopocollError('ETOPOLOGY', 'empty locality string', where);
  const tokens: LocalityToken[] = [];
  let seen = 0;
  let start = 0;
  for (;;) {
    let end = text.indexOf(':', start);
    if (end < 0) end = text.length;
    if (end === start) badToken(text, start, end, 'is empty', where);
    const code = text.slice(start, start + 2);
    const bit = CODE_BIT[code];
    if (bit === undefined || end - start < 2) badToken(text, start, end, 'has no known code (SK, L3, L2, L1, CR, HT or NM)', where);
    if ((seen & bit) !== 0) badToken(text, start, end, `repeats the code ${code}`, where);
    seen |= bit;
    if (end - start === 2) badToken(text, start, end, 'has no indices', where);
    const indices = scanIndexList(text, start + 2, end);
    if (typeof indices === 'string') badToken(text, start, end, `has an invalid index list: ${indices}`, where);
    tokens.push({ code: code as LocalityCode, indices });
    if (end === text.length) return { tokens };
    start = end + 1;
  }
}

function badToken(text: string, start: number, end: number, why: string, where: ErrorLocation): never {
  throw new TopocollError('ETOPOLOGY', `locality string ${quote(text)}: token ${quote(text.slice(start, end))} ${why}`, where);
}

/**
 * Formats a locality back to its string: tokens in stored order with hwloc list syntax, so a
 * parsed PMIx string formats back to itself byte for byte.
 */
export function formatLocality(loc: Locality): string {
  if (loc.tokens.length === 0) throw new TopocollError('EINVAL', 'cannot format a locality without tokens');
  let out = '';
  for (const token of loc.tokens) {
    if (token.indices.length === 0) {
      throw new TopocollError('EINVAL', `cannot format locality token ${token.code} without indices`);
    }
    if (out !== '') out += ':';
    out += token.code + formatIndexList(token.indices);
  }
  return out;
}

/**
 * The logical indices a locality gives for one code; undefined when the code is absent, which
 * means "unknown at that level", not "shares nothing".
 */
export function localityIndices(loc: Locality, code: LocalityCode): number[] | undefined {
  for (const token of loc.tokens) if (token.code === code) return token.indices;
  return undefined;
}
