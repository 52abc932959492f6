import { init } from '../init.js';

/**
 * A rank of `topocoll bench --pt2pt` (2 ranks): OSU's osu_latency (a ping-pong of blocking
 * sendSync/recvSync; the one-way latency is half a round trip) and osu_bw (`window` isends of
 * one size, then a 4-byte acknowledgement; the bandwidth is the bytes of a window over its time),
 * both with warm-up rounds. Rank 0 prints one JSON line per size and test.
 */
export interface Pt2ptSettings {
  sizes: number[];
  /** Round trips of the small sizes (a tenth above 64 KiB, at least 10); windows: a tenth of it. */
  iterations: number;
  window: number;
}

export interface Pt2ptRow {
  test: 'latency' | 'bandwidth';
  bytes: number;
  /** latency: one-way µs; bandwidth: MB/s (10⁶ bytes). */
  value: number;
}

async function pt2ptMain(settings: Pt2ptSettings): Promise<void> {
  const comm = await init();
  const peer = comm.rank ^ 1;
  const ack = new Uint8Array(4);
  try {
    if (peer >= comm.size) return;
    for (const bytes of settings.sizes) {
      const buf = new Uint8Array(Math.max(bytes, 1)).subarray(0, bytes);
      const iterations = bytes > 65_536 ? Math.max(10, Math.floor(settings.iterations / 10)) : settings.iterations;
      const pingPong = (n: number): void => {
        for (let i = 0; i < n; i++) {
          if (comm.rank === 0) {
            comm.sendSync(buf, peer, 1);
            comm.recvSync(buf, peer, 1);
          } else {
            comm.recvSync(buf, peer, 1);
            comm.sendSync(buf, peer, 1);
          }
        }
      };
      comm.barrierSync();
      pingPong(Math.max(2, iterations / 10));
      let start = process.hrtime.bigint();
      pingPong(iterations);
      const latency = Number(process.hrtime.bigint() - start) / 1000 / iterations / 2;
      if (comm.rank === 0) console.log(JSON.stringify({ test: 'latency', bytes, value: latency } satisfies Pt2ptRow));

      const windows = Math.max(3, Math.floor(iterations / 10));
      const bufs = Array.from({ length: settings.window }, () => new Uint8Array(bytes));
      const window = (n: number): void => {
        for (let k = 0; k < n; k++) {
          if (comm.rank === 0) {
            const sent = bufs.map((b) => comm.isend(b, peer, 2));
            for (const r of sent) r.wait();
            comm.recvSync(ack, peer, 3);
          } else {
            const got = bufs.map((b) => comm.irecv(b, peer, 2));
            for (const r of got) r.wait();
            comm.sendSync(ack, peer, 3);
          }
        }
      };
      comm.barrierSync();
      window(1);
      start = process.hrtime.bigint();
      window(windows);
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      const mbps = (bytes * settings.window * windows) / seconds / 1e6;
      if (comm.rank === 0) console.log(JSON.stringify({ test: 'bandwidth', bytes, value: mbps } satisfies Pt2ptRow));
    }
  } finally {
    comm.close();
  }
}

// Started as a script by the launcher: the settings come in the environment.
if (process.env.TOPOCOLL_PT2PT !== undefined) {
  await pt2ptMain(JSON.parse(process.env.TOPOCOLL_PT2PT) as Pt2ptSettings);
}
