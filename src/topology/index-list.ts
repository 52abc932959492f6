import { TopocollError, type ErrorLocation } from '../errors.js';
import { quote } from '../util/quote.js';

/**
 * The two textual forms of index sets that topology sources use: hwloc's list syntax
 * (`0-3,8,10-11`, also the kernel's `cpulist` and PMIx locality tokens) and hwloc's hex
 * cpusets (`0x00000040,,0x0`, also the kernel's `Cpus_allowed` masks). Both decode to the
 * model's index sets: sorted arrays of distinct non-negative integers.
 */

/**
 * Largest index accepted. Real PU and object numbers stay far below it (Linux caps NR_CPUS at
 * 8192); the cap exists so that a corrupt `0-4000000000` from a file or a peer fails with a
 * message instead of exhausting memory while the range is expanded.
 */
const MAX_INDEX = (1 << 20) - 1;
/**
 * Elements one list may expand to, repeats included. A set has at most MAX_INDEX + 1 distinct
 * members, and the writers of these lists (the kernel, hwloc, PMIx) never repeat an index, so a
 * longer list is malformed; stopping there bounds the work and memory of a 50 MB cpuset to what
 * a real 2^20-PU one needs.
 */
const MAX_ELEMENTS = MAX_INDEX + 1;

const CHAR_0 = 0x30;
const CHAR_9 = 0x39;
const CHAR_COMMA = 0x2c;
const CHAR_DASH = 0x2d;
const CHAR_SPACE = 0x20;
const CHAR_TAB = 0x09;

/**
 * Decodes the list syntax in `text[start, end)` without copying it, so the locality-string
 * parser can read its tokens in place. Returns the sorted, deduplicated set, or a sentence
 * saying what is wrong (callers wrap it in an error that names their own context).
 * Spaces and tabs are allowed after a comma because the kernel ABI documents lists that way.
 */
export function scanIndexList(text: string, start: number, end: number): number[] | string {
  const out: number[] = [];
  if (start === end) return out;
  let ascending = true;
  let last = -1;
  let i = start;
  for (;;) {
    let j = digitsEnd(text, i, end);
    if (j === i) return describeBadElement(text, i, end);
    const lo = decimal(text, i, j);
    if (lo > MAX_INDEX) return tooLarge(text, i, j);
    i = j;
    let hi = lo;
    if (i < end && text.charCodeAt(i) === CHAR_DASH) {
      i++;
      j = digitsEnd(text, i, end);
      if (j === i) {
        if (i === end || text.charCodeAt(i) === CHAR_COMMA) return `the open range "${lo}-" (an infinite set) is not allowed`;
        return describeBadElement(text, i, end);
      }
      hi = decimal(text, i, j);
      if (hi > MAX_INDEX) return tooLarge(text, i, j);
      i = j;
      if (lo > hi) return `the range "${lo}-${hi}" starts above its end`;
    }
    if (lo <= last) ascending = false;
    if (out.length + (hi - lo + 1) > MAX_ELEMENTS) return `it lists more than ${MAX_ELEMENTS} indices (repeats included), the limit for one set`;
    for (let v = lo; v <= hi; v++) out.push(v);
    if (hi > last) last = hi;
    if (i === end) break;
    if (text.charCodeAt(i) !== CHAR_COMMA) return `unexpected character "${text[i]}"`;
    i++;
    while (i < end && (text.charCodeAt(i) === CHAR_SPACE || text.charCodeAt(i) === CHAR_TAB)) i++;
    if (i === end) return 'it ends with a comma';
  }
  return ascending ? out : sortUnique(out);
}

/** Position of the first non-digit at or after `i`. */
function digitsEnd(text: string, i: number, end: number): number {
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c < CHAR_0 || c > CHAR_9) break;
    i++;
  }
  return i;
}

/** Value of the digits `text[i, j)`; saturates instead of losing precision on absurd lengths. */
function decimal(text: string, i: number, j: number): number {
  let value = 0;
  for (let k = i; k < j && value <= MAX_INDEX; k++) value = value * 10 + (text.charCodeAt(k) - CHAR_0);
  return value;
}

function tooLarge(text: string, i: number, j: number): string {
  return `index ${j - i > 20 ? `of ${j - i} digits` : text.slice(i, j)} is larger than the supported maximum ${MAX_INDEX}`;
}

function describeBadElement(text: string, i: number, end: number): string {
  if (i === end || text.charCodeAt(i) === CHAR_COMMA) return 'it has an empty element';
  return `unexpected character "${text[i]}"`;
}

function sortUnique(values: number[]): number[] {
  values.sort((a, b) => a - b);
  let n = 0;
  for (let k = 0; k < values.length; k++) {
    if (k === 0 || values[k] !== values[n - 1]) values[n++] = values[k]!;
  }
  values.length = n;
  return values;
}

/**
 * Parses hwloc list syntax (`0-3,8,10-11`); the empty string is the empty set. `where` is
 * attached to the error so callers can say which file, line or rank the text came from.
 */
export function parseIndexList(text: string, where: ErrorLocation = {}): number[] {
  const result = scanIndexList(text, 0, text.length);
  if (typeof result === 'string') {
    throw new TopocollError('ETOPOLOGY', `invalid index list ${quote(text)}: ${result}`, where);
  }
  return result;
}

/**
 * Formats a set in list syntax exactly as `hwloc_bitmap_list_asprintf` does (runs of two or
 * more consecutive indices as `a-b`), so computed locality strings equal the ones PMIx
 * generates byte for byte.
 */
export function formatIndexList(indices: readonly number[]): string {
  let out = '';
  let k = 0;
  while (k < indices.length) {
    const lo = indices[k]!;
    if (!Number.isInteger(lo) || lo < 0 || (k > 0 && lo <= indices[k - 1]!)) {
      throw new TopocollError('EINVAL', `cannot format [${indices.join(',')}] as an index list: it must be sorted, distinct, non-negative integers`);
    }
    let hi = lo;
    while (k + 1 < indices.length && indices[k + 1] === hi + 1) {
      hi++;
      k++;
    }
    if (out !== '') out += ',';
    out += lo === hi ? `${lo}` : `${lo}-${hi}`;
    k++;
  }
  return out;
}

const WORD_BITS = 32;

/**
 * Parses a hex cpuset: comma-separated 32-bit words, most significant first. Accepts hwloc's
 * form (`0x%08x` words, leading zero words omitted, a zero word in the middle written as an
 * empty field: `0x00000040,,0x0` is PU 70) and the kernel's mask form (`ff,ffffffff`, no `0x`,
 * zero-padded). hwloc's infinite sets (`0xf...f,…`) are rejected: no machine has them.
 */
export function parseHwlocCpuset(hex: string, where: ErrorLocation = {}): number[] {
  const fail = (why: string): never => {
    throw new TopocollError('ETOPOLOGY', `invalid cpuset ${quote(hex)}: ${why}`, where);
  };
  if (hex === '') fail('it is empty');
  if (hex.startsWith('0xf...f')) fail('it is an infinite set');
  let words = 1;
  for (let i = hex.indexOf(','); i >= 0; i = hex.indexOf(',', i + 1)) {
    if (++words * WORD_BITS > MAX_INDEX + 1) fail(`it has more than ${MAX_INDEX + 1} bits`);
  }
  const fields = hex.split(',');
  const values = new Array<number>(fields.length);
  for (let f = 0; f < fields.length; f++) {
    const field = fields[f]!;
    if (field === '') {
      if (f === 0 || f === fields.length - 1) fail('its first or last word is empty');
      values[f] = 0;
      continue;
    }
    const digits = field.startsWith('0x') || field.startsWith('0X') ? field.slice(2) : field;
    if (!/^[0-9a-fA-F]{1,8}$/.test(digits)) fail(`${quote(field)} is not a 32-bit hex word`);
    values[f] = Number.parseInt(digits, 16);
  }
  const out: number[] = [];
  for (let f = fields.length - 1; f >= 0; f--) {
    const word = values[f]!;
    if (word === 0) continue;
    const base = (fields.length - 1 - f) * WORD_BITS;
    for (let bit = 0; bit < WORD_BITS; bit++) {
      if ((word >>> bit) & 1) out.push(base + bit);
    }
  }
  return out;
}
