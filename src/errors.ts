/**
 * The one error type topocoll throws. Every failure a user can cause or meet carries a stable
 * `code` (safe to switch on) and a message that names where the problem is — rank, level,
 * file:line:column — and, where there is one, what to do about it.
 */
export type TopocollErrorCode =
  | 'EINVAL' // a bad argument or a bad value on the command line
  | 'ECONFIG' // a configuration file or option that does not validate
  | 'ETOPOLOGY' // a topology, locality or network description that is malformed or inconsistent
  | 'EMISMATCH' // ranks called collectives that do not match
  | 'ETIMEDOUT' // a wait exceeded its deadline
  | 'EPEERLOST' // a peer process died or its connection broke
  | 'ECLOSED' // the communicator was used after close()
  | 'ETRUNCATE' // a message was longer than the receive's buffer (the message is consumed)
  | 'ENOMEM' // shared memory beyond the node's budget (shm.budgetBytes)
  | 'ENOTSUP'; // the runtime, system or installation cannot do this (ArrayBuffers over shared memory; namespaces for topocoll cluster; topocoll/mpi not built)

/** Where an error was found: any subset may be known. */
export interface ErrorLocation {
  /** File the offending input came from (a path as the user gave it). */
  file?: string;
  /** 1-based line in `file`. */
  line?: number;
  /** 1-based column in `file`. */
  column?: number;
  /** Rank the problem concerns. */
  rank?: number;
  /** Level (e.g. `numa`, `switch1`) the problem concerns. */
  level?: string;
  /** Compute node the problem concerns. */
  node?: string;
}

export interface TopocollErrorOptions extends ErrorLocation {
  /** What the user can do about it, one sentence. */
  hint?: string;
  cause?: unknown;
}

export class TopocollError extends Error {
  readonly code: TopocollErrorCode;
  readonly file?: string;
  readonly line?: number;
  readonly column?: number;
  readonly rank?: number;
  readonly level?: string;
  readonly node?: string;
  readonly hint?: string;
  /** The problem alone, without location prefix or hint (the full text is `message`). */
  readonly detail: string;

  constructor(code: TopocollErrorCode, detail: string, options: TopocollErrorOptions = {}) {
    super(formatMessage(code, detail, options), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'TopocollError';
    this.code = code;
    this.detail = detail;
    this.file = options.file;
    this.line = options.line;
    this.column = options.column;
    this.rank = options.rank;
    this.level = options.level;
    this.node = options.node;
    this.hint = options.hint;
  }
}

/** `file:line:col: detail (rank 3, level numa, node n1). hint` */
function formatMessage(code: TopocollErrorCode, detail: string, o: TopocollErrorOptions): string {
  let where = '';
  if (o.file !== undefined) {
    where = o.file;
    if (o.line !== undefined) where += `:${o.line}`;
    if (o.line !== undefined && o.column !== undefined) where += `:${o.column}`;
    where += ': ';
  }
  const context: string[] = [];
  if (o.rank !== undefined) context.push(`rank ${o.rank}`);
  if (o.level !== undefined) context.push(`level ${o.level}`);
  if (o.node !== undefined) context.push(`node ${o.node}`);
  const ctx = context.length > 0 ? ` (${context.join(', ')})` : '';
  const hint = o.hint !== undefined ? ` ${o.hint}` : '';
  const text = detail.replace(/\.$/, '');
  return `${code}: ${where}${text}${ctx}.${hint}`;
}

export function isTopocollError(e: unknown, code?: TopocollErrorCode): e is TopocollError {
  return e instanceof TopocollError && (code === undefined || e.code === code);
}

/**
 * Rethrows an error of one of topocoll's addons: one that carries a topocoll `code` (E…)
 * becomes a TopocollError with its message (naming `rank` when given; the original as `cause`
 * when `keepCause`); anything else is rethrown as it is.
 */
export function rethrowNative(e: unknown, options: { rank?: number; keepCause?: boolean } = {}): never {
  const code = (e as { code?: unknown } | null)?.code;
  if (e instanceof Error && typeof code === 'string' && /^E[A-Z]+$/.test(code)) {
    throw new TopocollError(code as TopocollErrorCode, e.message, { rank: options.rank, ...(options.keepCause ? { cause: e } : {}) });
  }
  throw e;
}
