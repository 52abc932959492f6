// The shortest job: every rank joins, meets the others once and leaves. bench/job-start.mjs
// times whole jobs of it; a job's time beyond this is its collectives'.
import { init } from 'topocoll';

const comm = await init();
comm.barrierSync();
comm.close();
