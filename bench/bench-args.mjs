// What the bench scripts that take checkouts as their remaining arguments share: options taken
// out of the argument list, so that what is left is the positional arguments.

/** The value after `name` (removing both from `args`), or `fallback` when it is absent. */
export function takeOption(args, name, fallback) {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const value = args[at + 1];
  args.splice(at, 2);
  return value;
}

/** Whether `name` is in `args` (removing it). */
export function takeFlag(args, name) {
  const at = args.indexOf(name);
  if (at >= 0) args.splice(at, 1);
  return at >= 0;
}
