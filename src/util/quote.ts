/** Longest piece of input text shown whole in an error message. */
const EXCERPT_CHARS = 80;

/**
 * Input text for an error message: whole when short, else its start and its length, so that the
 * message about a 50 MB line is not itself 50 MB.
 */
export function excerpt(text: string, max = EXCERPT_CHARS): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}

/** `excerpt` in double quotes: `"text"`, or `"start…" (N characters)`. */
export function quote(text: string, max = EXCERPT_CHARS): string {
  return text.length <= max ? `"${text}"` : `"${text.slice(0, max)}…" (${text.length} characters)`;
}
