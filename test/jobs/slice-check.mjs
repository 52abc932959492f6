// @ts-check
// A one-process program (a world of one): prints the main thread's scheduler slice (se.slice of
// /proc/self/sched, in ns) before init, with one and two communicators open, after closing the
// first and after closing both — as "stage ns" lines.
import { readFileSync } from 'node:fs';
import { init } from 'topocoll';

const slice = () => Number(/^se\.slice\s*:\s*(\d+)/m.exec(readFileSync('/proc/self/sched', 'utf8'))?.[1] ?? -1);
console.log(`before ${slice()}`);
const a = await init();
console.log(`one ${slice()}`);
const b = await init();
console.log(`two ${slice()}`);
a.close();
console.log(`first-closed ${slice()}`);
b.close();
console.log(`both-closed ${slice()}`);
