/**
 * Slurm hostlist expressions (`tux[0-3,7]`, `rack[1-2]n[01-16]-ib`), the notation every Slurm
 * file and variable uses for sets of nodes and switches. We follow `src/common/hostlist.c` so that
 * a name written in `topology.conf`, in `SLURM_JOB_NODELIST` or in a simple network file expands
 * to exactly the names Slurm itself would use.
 */
import { TopocollError, type ErrorLocation } from '../../errors.js';

/** Slurm's per-range limit (`MAX_RANGE`): a range wider than this is almost surely a typo. */
const MAX_HOSTS_PER_RANGE = 65536;
/**
 * Nested bracket groups multiply (`a[0-65535]b[0-65535]` is 4·10⁹ names); no cluster has more
 * than a million nodes, so a larger expansion is a mistake we refuse before allocating it.
 */
const MAX_HOSTS_PER_EXPRESSION = 1 << 20;

const SEPARATORS = new Set([',', ' ', '\t', '\n', '\r']);

/**
 * Expands a hostlist expression into names, in Slurm's order (earlier brackets are the outer
 * loops), keeping duplicates so that callers can report them. `where` locates the expression in
 * its file for error messages.
 */
export function expandHostlist(expr: string, where: ErrorLocation = {}): string[] {
  const names: string[] = [];
  for (const token of splitTokens(expr, where)) {
    const groups = parseToken(token, expr, where);
    let total = 1;
    for (const g of groups) total *= g.length;
    if (names.length + total > MAX_HOSTS_PER_EXPRESSION) {
      fail(expr, `expands to more than ${MAX_HOSTS_PER_EXPRESSION} names`, where, 'Split it, or check the ranges for a typo.');
    }
    product(groups, 0, '', names);
  }
  return names;
}

/** Splits on separators outside brackets and checks that brackets balance and do not nest. */
function splitTokens(expr: string, where: ErrorLocation): string[] {
  const tokens: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of expr) {
    if (ch === '[') {
      if (depth > 0) fail(expr, "has a '[' inside brackets", where, BRACKET_HINT);
      depth = 1;
    } else if (ch === ']') {
      if (depth === 0) fail(expr, "has a ']' without a matching '['", where, BRACKET_HINT);
      depth = 0;
    } else if (depth === 0 && SEPARATORS.has(ch)) {
      if (current !== '') tokens.push(current);
      current = '';
      continue;
    }
    current += ch;
  }
  if (depth > 0) fail(expr, "has a '[' without a matching ']'", where, BRACKET_HINT);
  if (current !== '') tokens.push(current);
  return tokens;
}

const BRACKET_HINT = 'Write ranges as prefix[lo-hi,n,…]suffix with one level of brackets.';

/**
 * Turns `a[1-2]b[01-03]c` into the alternatives for each part: [['a'], ['1','2'], ['b'],
 * ['01','02','03'], ['c']]. Brackets are already known to balance.
 */
function parseToken(token: string, expr: string, where: ErrorLocation): string[][] {
  const groups: string[][] = [];
  let rest = token;
  for (let open = rest.indexOf('['); open >= 0; open = rest.indexOf('[')) {
    const close = rest.indexOf(']', open);
    if (open > 0) groups.push([rest.slice(0, open)]);
    groups.push(expandRanges(rest.slice(open + 1, close), expr, where));
    rest = rest.slice(close + 1);
  }
  if (rest !== '') groups.push([rest]);
  return groups;
}

/** `01-03,7` → 01, 02, 03, 7: each range is zero-padded to the width of its low bound. */
function expandRanges(body: string, expr: string, where: ErrorLocation): string[] {
  const out: string[] = [];
  for (const range of body.split(',')) {
    if (range === '') fail(expr, 'has an empty range', where, 'Remove the empty range or the stray comma.');
    const m = /^(\d+)(?:-(\d+))?$/.exec(range);
    if (m === null) {
      fail(expr, `has range '${range}', which is not decimal lo or lo-hi`, where, 'Ranges are non-negative decimal numbers, e.g. [0-3,7].');
    }
    const loText = m[1] as string;
    const lo = Number(loText);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi)) {
      fail(expr, `has range '${range}' with a number too large`, where, 'Check the range for a typo.');
    }
    if (lo > hi) fail(expr, `has range '${range}' whose low bound exceeds its high bound`, where, 'Write the smaller number first.');
    if (hi - lo + 1 > MAX_HOSTS_PER_RANGE) {
      fail(expr, `has range '${range}' of more than ${MAX_HOSTS_PER_RANGE} names`, where, 'Split the range (Slurm has the same limit).');
    }
    for (let n = lo; n <= hi; n++) out.push(String(n).padStart(loText.length, '0'));
  }
  return out;
}

function product(groups: string[][], i: number, prefix: string, out: string[]): void {
  const group = groups[i];
  if (group === undefined) {
    out.push(prefix);
    return;
  }
  for (const part of group) product(groups, i + 1, prefix + part, out);
}

function fail(expr: string, problem: string, where: ErrorLocation, hint: string): never {
  throw new TopocollError('ETOPOLOGY', `hostlist "${expr}" ${problem}`, { ...where, hint });
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
  for (let i = 0; i < numbers.length; ) {
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
