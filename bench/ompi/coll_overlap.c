/*
 * coll_overlap: how much computation the MPI library's non-blocking collectives overlap,
 * measured as OSU's osu_ibcast / osu_iallreduce do and as bench/overlap.mjs measures topocoll's
 * requests, so both can be tabulated side by side (bench/overlap-table.mjs). Per size:
 *   pure     mean time of MPI_I<coll> + MPI_Wait
 *   compute  a compute loop calibrated to take `pure`, timed alone inside the next loop
 *   total    mean time of MPI_I<coll> + compute + MPI_Wait
 *   overlap  100 * (1 - (total - compute) / pure), at least 0
 * each the mean over ranks of every rank's mean. No MPI_Test inside the compute loop (OSU's
 * default): the library progresses on its own or not at all.
 *
 * Usage: coll_overlap <ibcast|iallreduce> <min_bytes> <max_bytes> [time_ms]
 * Output (rank 0): one JSON line per size, as bench/overlap.mjs prints.
 * Bcast moves MPI_BYTE from rank 0; allreduce sums MPI_INT32_T (bytes/4 elements, at least 1).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile double sink;

/* Dependent floating-point work the compiler cannot drop (the same loop as bench/overlap.mjs). */
static void work(long n) {
    double x = sink + 1.0000001;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

/* Loop iterations per microsecond: the best of five timed rounds. */
static double calibrate(void) {
    work(1000000);
    double best = 0;
    for (int round = 0; round < 5; round++) {
        const long n = 2000000;
        double t0 = MPI_Wtime();
        work(n);
        double r = n / ((MPI_Wtime() - t0) * 1e6);
        if (r > best) best = r;
    }
    return best;
}

static double mean_over_ranks(double x, int size) {
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / size;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: coll_overlap <ibcast|iallreduce> <min_bytes> <max_bytes> [time_ms]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int bcast = strcmp(argv[1], "ibcast") == 0;
    if (!bcast && strcmp(argv[1], "iallreduce") != 0) {
        if (rank == 0) fprintf(stderr, "coll_overlap: unknown collective %s\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const size_t min_bytes = strtoull(argv[2], NULL, 10), max_bytes = strtoull(argv[3], NULL, 10);
    const double phase_ms = argc > 4 ? atof(argv[4]) : 200;
    const double rate = calibrate();
    void *buf = malloc(max_bytes + 4), *out = malloc(max_bytes + 4);
    if (buf == NULL || out == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    memset(buf, 1, max_bytes + 4);
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
        const int count = bcast ? (int)bytes : (int)(bytes / 4 > 0 ? bytes / 4 : 1);
        MPI_Request req;
#define START()                                                                              \
    do {                                                                                     \
        if (bcast)                                                                           \
            MPI_Ibcast(buf, count, MPI_BYTE, 0, MPI_COMM_WORLD, &req);                       \
        else                                                                                 \
            MPI_Iallreduce(buf, out, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &req);     \
    } while (0)
        const int warm = 20;
        double t0 = MPI_Wtime();
        for (int i = 0; i < warm; i++) {
            START();
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        double per = (MPI_Wtime() - t0) / warm;
        double want = phase_ms * 1e-3 / (per > 1e-9 ? per : 1e-9);
        if (want > 200000) want = 200000;
        double agreed = 0;
        MPI_Allreduce(&want, &agreed, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        const int iterations = agreed < 3 ? 3 : (int)agreed;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iterations; i++) {
            START();
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        const double pure = mean_over_ranks((MPI_Wtime() - t0) * 1e6 / iterations, size);

        long n = (long)(pure * rate + 0.5);
        if (n < 1) n = 1;
        double compute = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iterations; i++) {
            START();
            double c0 = MPI_Wtime();
            work(n);
            compute += MPI_Wtime() - c0;
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        const double total = mean_over_ranks((MPI_Wtime() - t0) * 1e6 / iterations, size);
        const double compute_us = mean_over_ranks(compute * 1e6 / iterations, size);
        double overlap = 100 * (1 - (total - compute_us) / pure);
        if (overlap < 0) overlap = 0;
        if (rank == 0)
            printf("{\"impl\":\"ompi\",\"collective\":\"%s\",\"p\":%d,\"bytes\":%zu,\"pureUs\":%.4f,\"computeUs\":%.4f,\"totalUs\":%.4f,"
                   "\"overlapPct\":%.2f,\"iterations\":%d}\n",
                   argv[1], size, bytes, pure, compute_us, total, overlap, iterations);
        fflush(stdout);
#undef START
    }
    free(buf);
    free(out);
    MPI_Finalize();
    return 0;
}
