/**
 * Slurm hostlist expressions (`tux[0-3,7]`, `rack[1-2]n[01-16]-ib`), the notation every Slurm
 * file and variable uses for sets of nodes and switches. We follow `src/common/hostlist.c` so that
 * a name written in `topology.conf`, in `SLURM_JOB_NODELIST` or in a simple network file expands
 * to exactly the names Slurm itself would use.
 */
import { TopocollError, type ErrorLocation } from '../../errors.js';
import { quote } from '../../util/quote.js';

/** Slurm's per-range limit (`MAX_RANGE`): a range wider than this is almost surely a typo. */
const MAX_HOSTS_PER_RANGE = 65536;
/**
 * Nested bracket groups multiply (`a[0-65535]b[0-65535]` is 4·10⁹ names); no cluster has more
 * than a million nodes, so a larger expansion is a mistake we refuse before allocating it.
 */
export const MAX_HOSTS_PER_EXPRESSION = 1 << 20;
/**
 * The same bound over every hostlist of one file: lines that each stay below the per-expression
 * limit could otherwise add up to any number of names.
 */
export const MAX_HOSTS_PER_FILE = 1 << 20;
/** DNS names have at most 253 characters; bounds the memory of every expanded name. */
export const MAX_HOST_NAME_LENGTH = 255;

const SEPARATORS = new Set([',', ' ', '\t', '\n', '\r']);

/** `lo`…`hi`, each number zero-padded to `width` digits. */
interface NumberRange {
  lo: number;
  hi: number;
  width: number;
}

/** One part of a token: literal text, or the ranges of a bracket group. */
type Part = string | NumberRange[];

/**
 * Expands a hostlist expression into names, in Slurm's order (earlier brackets are the outer
 * loops), keeping duplicates so that callers can report them. `where` locates the expression in
 * its file for error messages. The size is checked before anything is expanded.
 */
export function expandHostlist(expr: string, where: ErrorLocation = {}): string[] {
  hostlistSize(expr, where);
  const names: string[] = [];
  for (const token of tokens(expr, where)) {
    for (const name of expandToken(parseToken(token, expr, where))) names.push(name);
  }
  return names;
}

/**
 * How many names `expr` expands to, without expanding it; throws the errors `expandHostlist`
 * would, including the limits on ranges, names per expression and name length.
 */
export function hostlistSize(expr: string, where: ErrorLocation = {}): number {
  let total = 0;
  for (const token of tokens(expr, where)) {
    const parts = parseToken(token, expr, where);
    let count = 1;
    let length = 0;
    for (const part of parts) {
      if (typeof part === 'string') {
        length += part.length;
        continue;
      }
      let alternatives = 0;
      let digits = 0;
      for (const r of part) {
        alternatives += r.hi - r.lo + 1;
        digits = Math.max(digits, r.width, String(r.hi).length);
        if (alternatives > MAX_HOSTS_PER_EXPRESSION) break;
      }
      count *= alternatives;
      length += digits;
      if (count > MAX_HOSTS_PER_EXPRESSION) break;
    }
    total += count;
    if (total > MAX_HOSTS_PER_EXPRESSION) {
      fail(expr, `expands to more than ${MAX_HOSTS_PER_EXPRESSION} names`, where, 'Split it, or check the ranges for a typo.');
    }
    if (length > MAX_HOST_NAME_LENGTH) {
      fail(
        expr,
        `gives names of up to ${length} characters, more than ${MAX_HOST_NAME_LENGTH}`,
        where,
        'Host names have at most 253 characters; check the brackets.',
      );
    }
  }
  return total;
}

/**
 * Counts the names of every hostlist of one file against `MAX_HOSTS_PER_FILE`, before any is
 * expanded, so that an oversized file fails without allocating its names.
 */
export class HostlistBudget {
  private names = 0;

  constructor(private readonly limit = MAX_HOSTS_PER_FILE) {}

  /** Adds the names of `expr`, or throws naming the expression that passes the limit. */
  take(expr: string, where: ErrorLocation): void {
    this.names += hostlistSize(expr, where);
    if (this.names > this.limit) {
      fail(
        expr,
        `takes the names of this file past ${this.limit}, the limit for one file`,
        where,
        'No cluster has that many nodes; check the ranges for a typo.',
      );
    }
  }
}

/**
 * The tokens of `expr`, split on separators outside brackets, one at a time (an expression can
 * be a whole file's worth); checks that brackets balance and do not nest.
 */
function* tokens(expr: string, where: ErrorLocation): Generator<string> {
  let inside = false;
  let start = 0;
  for (let i = 0; i < expr.length; i++) {
    const ch = expr[i] as string;
    if (ch === '[') {
      if (inside) fail(expr, "has a '[' inside brackets", where, BRACKET_HINT);
      inside = true;
    } else if (ch === ']') {
      if (!inside) fail(expr, "has a ']' without a matching '['", where, BRACKET_HINT);
      inside = false;
    } else if (!inside && SEPARATORS.has(ch)) {
      if (i > start) yield expr.slice(start, i);
      start = i + 1;
    }
  }
  if (inside) fail(expr, "has a '[' without a matching ']'", where, BRACKET_HINT);
  if (expr.length > start) yield expr.slice(start);
}

const BRACKET_HINT = 'Write ranges as prefix[lo-hi,n,…]suffix with one level of brackets.';

/**
 * Turns `a[1-2]b[01-03]c` into its parts: 'a', [1-2], 'b', [01-03], 'c'. Brackets are already
 * known to balance.
 */
function parseToken(token: string, expr: string, where: ErrorLocation): Part[] {
  const parts: Part[] = [];
  let rest = token;
  for (let open = rest.indexOf('['); open >= 0; open = rest.indexOf('[')) {
    const close = rest.indexOf(']', open);
    if (open > 0) parts.push(rest.slice(0, open));
    parts.push(parseRanges(rest.slice(open + 1, close), expr, where));
    rest = rest.slice(close + 1);
  }
  if (rest !== '') parts.push(rest);
  return parts;
}

/** `01-03,7` → 01–03 padded to 2 digits, 7: each range is zero-padded to the width of its low bound. */
function parseRanges(body: string, expr: string, where: ErrorLocation): NumberRange[] {
  const ranges: NumberRange[] = [];
  for (const range of body.split(',')) {
    if (range === '') fail(expr, 'has an empty range', where, 'Remove the empty range or the stray comma.');
    const m = /^(\d+)(?:-(\d+))?$/.exec(range);
    if (m === null) {
      fail(expr, `has range ${quote(range)}, which is not decimal lo or lo-hi`, where, 'Ranges are non-negative decimal numbers, e.g. [0-3,7].');
    }
    const loText = m[1] as string;
    const lo = Number(loText);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi)) {
      fail(expr, `has range ${quote(range)} with a number too large`, where, 'Check the range for a typo.');
    }
    if (lo > hi) fail(expr, `has range ${quote(range)} whose low bound exceeds its high bound`, where, 'Write the smaller number first.');
    if (hi - lo + 1 > MAX_HOSTS_PER_RANGE) {
      fail(expr, `has range ${quote(range)} of more than ${MAX_HOSTS_PER_RANGE} names`, where, 'Split the range (Slurm has the same limit).');
    }
    ranges.push({ lo, hi, width: loText.length });
  }
  return ranges;
}

/**
 * The names of one token, the earlier parts varying slowest. Parts with one alternative are
 * joined to the next group, so the work is the number of names times the groups with choices
 * (at most 20 for 2^20 names), however many brackets like `[0]` the token has.
 */
function expandToken(parts: Part[]): string[] {
  let names = [''];
  let pending = '';
  for (const part of parts) {
    const alternatives: string[] = [];
    if (typeof part !== 'string') {
      for (const r of part) for (let n = r.lo; n <= r.hi; n++) alternatives.push(pending + String(n).padStart(r.width, '0'));
    }
    if (alternatives.length <= 1) {
      pending = typeof part === 'string' ? pending + part : (alternatives[0] as string);
      continue;
    }
    pending = '';
    const next = new Array<string>(names.length * alternatives.length);
    let k = 0;
    for (const prefix of names) for (const a of alternatives) next[k++] = prefix + a;
    names = next;
  }
  return pending === '' ? names : names.map((n) => n + pending);
}

function fail(expr: string, problem: string, where: ErrorLocation, hint: string): never {
  throw new TopocollError('ETOPOLOGY', `hostlist ${quote(expr)} ${problem}`, { ...where, hint });
}

/**
 * The inverse, for messages: `['s4','s5','s6','s7','tux1']` → `s[4-7],tux1`. Names are
 * deduplicated; names that differ only in their last number share one bracket, in numeric order,
 * and a run is only merged when expanding it gives back exactly the same names (so `n01,n02` →
 * `n[01-02]`, `n8,n9,n10` → `n[8-10]`, but `n1,n02` stays two ranges).
 */
export function compressHostlist(names: string[]): string {
  const groups = new Map<string, { prefix: string; suffix: string; numbers: Numbered[] }>();
  for (const name of new Set(names)) {
    // At most 15 digits, so that the value is exact; a longer run leaves its head in the prefix.
    const m = /^(.*?)(\d{1,15})(\D*)$/.exec(name);
    if (m === null) {
      groups.set(`literal\0${name}`, { prefix: name, suffix: '', numbers: [] });
      continue;
    }
    const [, prefix = '', digits = '', suffix = ''] = m;
    const key = `ranged\0${prefix}\0${suffix}`;
    const group = groups.get(key) ?? { prefix, suffix, numbers: [] };
    groups.set(key, group);
    group.numbers.push({ value: Number(digits), digits });
  }
  const parts: string[] = [];
  for (const { prefix, suffix, numbers } of groups.values()) {
    const [only] = numbers;
    if (numbers.length <= 1) {
      parts.push(prefix + (only?.digits ?? '') + suffix);
      continue;
    }
    parts.push(`${prefix}[${toRanges(numbers).join(',')}]${suffix}`);
  }
  return parts.join(',');
}

interface Numbered {
  value: number;
  digits: string;
}

/** Sorted `lo-hi` runs; a run extends while the next number, padded to the run's width, is spelled the same. */
function toRanges(numbers: Numbered[]): string[] {
  numbers.sort((a, b) => a.value - b.value || a.digits.length - b.digits.length);
  const ranges: string[] = [];
  for (let i = 0; i < numbers.length;) {
    const first = numbers[i] as Numbered;
    let last = first;
    for (let next = numbers[++i]; next !== undefined; next = numbers[++i]) {
      if (next.value !== last.value + 1 || next.digits !== String(next.value).padStart(first.digits.length, '0')) break;
      last = next;
    }
    ranges.push(first === last ? first.digits : `${first.digits}-${last.digits}`);
  }
  return ranges;
}
