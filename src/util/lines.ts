import { TopocollError } from '../errors.js';

/**
 * Lines one line-based input file may have (localities, network files, topology.conf): a
 * localities file has one line per rank, and jobs of two million ranks are beyond any planned
 * here. Iterating lines costs time even when they are empty, so a file is counted before it is
 * read line by line.
 */
export const MAX_INPUT_LINES = 1 << 21;

/**
 * The lines of a text one at a time, without their `\n` or `\r\n`, with 1-based numbers.
 * `text.split('\n')` would hold a slot for every line at once: 64 MiB of empty lines is an array
 * of 64 million entries. A text of more than MAX_INPUT_LINES lines is an ETOPOLOGY error naming
 * `file`.
 */
export function* lines(text: string, file: string | undefined): Generator<[line: string, number: number]> {
  let newlines = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i + 1 < text.length; i = text.indexOf('\n', i + 1)) {
    if (++newlines === MAX_INPUT_LINES) {
      throw new TopocollError('ETOPOLOGY', `the file has more than ${MAX_INPUT_LINES} lines, the limit for line-based input files`, {
        file,
        line: MAX_INPUT_LINES + 1,
        hint: 'Check that this is the right file: a localities file has one line per rank, a network file one per node or switch.',
      });
    }
  }
  let number = 0;
  for (let start = 0; start <= text.length;) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = end > start && text.charCodeAt(end - 1) === 0x0d ? text.slice(start, end - 1) : text.slice(start, end);
    yield [line, ++number];
    start = end + 1;
  }
}
