import type { CliIo } from './io.js';

/** Where the progress line goes: a terminal (process.stderr) or, in tests, a stand-in for one. */
export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

/**
 * One line on a terminal that long runs (bench, tune) rewrite in place: which case runs, how
 * many are left, time so far. It writes to the terminal itself, not through the command's
 * CliIo: it is decoration, never output, so piped or captured output (tests, `> file`) never
 * contains it, and without a terminal it does nothing at all.
 */
export class Progress {
  private readonly live: boolean;
  private readonly started = Date.now();
  private done = 0;
  private label = '';
  private shown = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly prefix: string,
    private total: number,
    private readonly stream: ProgressStream = process.stderr,
  ) {
    this.live = stream.isTTY === true;
    // The clock moves even while one case runs for minutes; unref: it never keeps the process up.
    if (this.live) this.timer = setInterval(() => this.draw(), 1000).unref();
  }

  /** Cases can turn out to be more (or fewer) than first counted. */
  setTotal(total: number): void {
    this.total = total;
  }

  /** The next case starts: `label` names it. */
  step(label: string): void {
    this.done++;
    this.label = label;
    this.draw();
  }

  /**
   * The command's output with the line taken away before each write and drawn again after, so
   * messages land on lines of their own.
   */
  around(io: CliIo): CliIo {
    if (!this.live) return io;
    const wrap = (write: (text: string) => void) => (text: string) => {
      this.clear();
      write(text);
      this.draw();
    };
    return { ...io, stdout: wrap(io.stdout), stderr: wrap(io.stderr) };
  }

  /** Removes the line for good (the command's own output follows). */
  finish(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.clear();
    this.label = '';
  }

  private clear(): void {
    if (this.shown) this.stream.write('\r\x1b[K');
    this.shown = false;
  }

  private draw(): void {
    if (!this.live || this.label === '') return;
    const s = Math.floor((Date.now() - this.started) / 1000);
    const left = Math.max(0, this.total - this.done);
    const text = `${this.prefix}: ${this.done}/${this.total} ${this.label} (${left} left after this, ${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')})`;
    // One terminal line at most: a wrapped line would not go back under the carriage return.
    // A terminal that does not tell its width (columns 0 or absent) gets the classic 80.
    const width = Math.max(20, (this.stream.columns || 80) - 1);
    this.stream.write(`\r\x1b[K${text.length > width ? text.slice(0, width - 1) + '…' : text}`);
    this.shown = true;
  }
}
