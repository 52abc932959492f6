/*
 * coll_latency: latency of the MPI library's own collectives, measured OSU-style
 * (plain timed loop, per-rank mean, min/avg/max across ranks), so that
 * `topocoll bench` can print Open MPI's numbers next to topocoll's.
 *
 * Usage:
 *   coll_latency <barrier|bcast|reduce|allreduce|allgather|gather|scatter|reduce-scatter|alltoall|scan|exscan> <min_bytes> <max_bytes>
 *                [iterations_small iterations_large large_threshold_bytes [warmup [repeats]]]
 *
 * With repeats R > 1 every rank times R loops and keeps the median of its R means (a VM's
 * noise comes in bursts; `topocoll bench --repeat` does the same on its side).
 *
 * Output (rank 0, stdout):
 *   # mca ...                                    (component/algorithm settings, if readable)
 *   # coll_latency <collective> p=<size> <MPI library version, first line>
 *   <bytes> <avg_us> <min_us> <max_us> <iterations>      (one line per size)
 *
 * Datatypes match topocoll byte for byte: bcast moves MPI_BYTE; reduce/allreduce
 * use MPI_INT32_T with MPI_SUM (count = bytes/4, at least 1); root is rank 0.
 * allgather: MPI_Allgather of MPI_BYTE, <bytes> from every rank (the result holds p × bytes).
 * gather, scatter: MPI_Gather / MPI_Scatter of MPI_BYTE, <bytes> per rank, root 0.
 * reduce-scatter: MPI_Reduce_scatter_block of MPI_INT32_T with MPI_SUM, <bytes> (count = bytes/4,
 * at least 1) per rank's block.
 * alltoall: MPI_Alltoall of MPI_BYTE, <bytes> per block (every rank sends and receives p × bytes).
 * scan, exscan: MPI_Scan / MPI_Exscan of MPI_INT32_T with MPI_SUM, <bytes> (count = bytes/4, at
 * least 1) per rank.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll {
    COLL_BARRIER, COLL_BCAST, COLL_REDUCE, COLL_ALLREDUCE, COLL_ALLGATHER, COLL_GATHER, COLL_SCATTER, COLL_REDUCE_SCATTER, COLL_ALLTOALL,
    COLL_SCAN, COLL_EXSCAN, COLL_COUNT
};

static const char *const coll_names[] = { "barrier", "bcast", "reduce", "allreduce", "allgather", "gather", "scatter", "reduce-scatter", "alltoall",
                                           "scan", "exscan" };
/* Open MPI's coll/tuned names of the same collectives (its coll_tuned_<name>_algorithm variables). */
static const char *const tuned_names[] = { "barrier", "bcast", "reduce", "allreduce", "allgather", "gather", "scatter", "reduce_scatter_block", "alltoall",
                                            "scan", "exscan" };

#define BUF_ALIGN 4096

static int rank, nprocs;

static void die(const char *msg) {
    if (rank == 0) fprintf(stderr, "coll_latency: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 1000000000L) return -1;
    *out = (int)v;
    return 0;
}

/* Page-aligned buffer, every page written once so first-touch faults stay out of the timing. */
static void *alloc_touched(size_t bytes) {
    size_t rounded = (bytes + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
    if (rounded == 0) rounded = BUF_ALIGN;
    void *p = aligned_alloc(BUF_ALIGN, rounded);
    if (!p) die("out of memory");
    memset(p, 0, rounded);
    return p;
}

/* ---- component / algorithm report via the MPI tool interface (best effort) ---- */

static int cvar_describe(const char *name, char *out, size_t outlen) {
    int idx;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS) return -1;
    char nm[256], desc[8];
    int nmlen = sizeof nm, desclen = sizeof desc, verb, bind, scope;
    MPI_Datatype dt;
    MPI_T_enum en;
    if (MPI_T_cvar_get_info(idx, nm, &nmlen, &verb, &dt, &en, desc, &desclen, &bind, &scope) != MPI_SUCCESS)
        return -1;
    if (bind != MPI_T_BIND_NO_OBJECT) return -1;
    MPI_T_cvar_handle h;
    int count;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return -1;
    int rc = -1;
    if (dt == MPI_INT && count == 1) {
        int v;
        if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) {
            rc = 0;
            snprintf(out, outlen, "%d", v);
            if (en != MPI_T_ENUM_NULL) {
                int n, enlen = sizeof nm;
                if (MPI_T_enum_get_info(en, &n, nm, &enlen) == MPI_SUCCESS) {
                    for (int i = 0; i < n; i++) {
                        int val, len = sizeof nm;
                        if (MPI_T_enum_get_item(en, i, &val, nm, &len) == MPI_SUCCESS && val == v) {
                            snprintf(out, outlen, "%d(%.200s)", v, nm);
                            break;
                        }
                    }
                }
            }
        }
    } else if (dt == MPI_C_BOOL && count == 1) {
        _Bool v;
        if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) {
            rc = 0;
            snprintf(out, outlen, "%s", v ? "true" : "false");
        }
    } else if (dt == MPI_CHAR && count > 0) {
        char *s = calloc((size_t)count + 1, 1);
        if (s && MPI_T_cvar_read(h, s) == MPI_SUCCESS) {
            rc = 0;
            snprintf(out, outlen, "%s", s[0] ? s : "(default)");
        }
        free(s);
    }
    MPI_T_cvar_handle_free(&h);
    return rc;
}

/*
 * Prints the MCA settings that decide which coll component (and, for tuned, which algorithm)
 * serves this collective. Selection itself is not exposed by MPI_T; with default settings on
 * an intra-communicator of p > 1, "tuned" (priority 30) wins and uses its fixed decision rules.
 */
static void print_mca_settings(enum coll c) {
    int provided;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return;
    char line[1024];
    size_t used = (size_t)snprintf(line, sizeof line, "# mca");
    char name[128], val[256];
    const char *plain[] = { "coll", "coll_tuned_priority", "coll_han_priority", "coll_sm_priority",
                            "coll_adapt_priority", "coll_tuned_use_dynamic_rules" };
    int found = 0;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        if (cvar_describe(plain[i], val, sizeof val) == 0 && used < sizeof line) {
            used += (size_t)snprintf(line + used, sizeof line - used, " %s=%s", plain[i], val);
            found++;
        }
    }
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm", tuned_names[c]);
    if (cvar_describe(name, val, sizeof val) == 0 && used < sizeof line) {
        used += (size_t)snprintf(line + used, sizeof line - used, " %s=%s", name, val);
        found++;
    }
    if (found) printf("%s\n", line);
    MPI_T_finalize();
}

/* ---- the measurement ---- */

static void check_once(enum coll c, void *sbuf, void *rbuf, int count) {
    int ok = 1;
    if (c == COLL_BCAST) {
        unsigned char *b = sbuf;
        memset(b, rank == 0 ? 0xA5 : 0, (size_t)count);
        MPI_Bcast(b, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        ok = b[0] == 0xA5 && b[count - 1] == 0xA5;
    } else if (c == COLL_REDUCE || c == COLL_ALLREDUCE) {
        int32_t *s = sbuf, *r = rbuf;
        for (int i = 0; i < count; i++) s[i] = 1;
        r[0] = r[count - 1] = 0;
        if (c == COLL_REDUCE)
            MPI_Reduce(s, r, count, MPI_INT32_T, MPI_SUM, 0, MPI_COMM_WORLD);
        else
            MPI_Allreduce(s, r, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        if (c == COLL_ALLREDUCE || rank == 0) ok = r[0] == nprocs && r[count - 1] == nprocs;
    } else if (c == COLL_SCAN || c == COLL_EXSCAN) {
        /* Rank r receives r + 1 (scan) or r (exscan; rank 0's result is undefined). */
        int32_t *s = sbuf, *r = rbuf;
        for (int i = 0; i < count; i++) s[i] = 1;
        r[0] = r[count - 1] = -1;
        if (c == COLL_SCAN)
            MPI_Scan(s, r, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Exscan(s, r, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        int want = c == COLL_SCAN ? rank + 1 : rank;
        if (c == COLL_SCAN || rank > 0) ok = r[0] == want && r[count - 1] == want;
    } else if (c == COLL_REDUCE_SCATTER) {
        int32_t *s = sbuf, *r = rbuf;
        for (int i = 0; i < count * nprocs; i++) s[i] = 1;
        r[0] = r[count - 1] = 0;
        MPI_Reduce_scatter_block(s, r, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        ok = r[0] == nprocs && r[count - 1] == nprocs;
    } else if (c == COLL_GATHER) {
        unsigned char *s = sbuf, *r = rbuf;
        memset(s, (rank + 1) & 0xff, (size_t)count);
        if (rank == 0) memset(r, 0, (size_t)count * (size_t)nprocs);
        MPI_Gather(s, count, MPI_BYTE, r, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        for (int i = 0; rank == 0 && i < nprocs && ok; i++) {
            size_t at = (size_t)i * (size_t)count;
            ok = r[at] == ((i + 1) & 0xff) && r[at + (size_t)count - 1] == ((i + 1) & 0xff);
        }
    } else if (c == COLL_SCATTER) {
        unsigned char *s = sbuf, *r = rbuf;
        for (int i = 0; rank == 0 && i < nprocs; i++) memset(s + (size_t)i * (size_t)count, (i + 1) & 0xff, (size_t)count);
        memset(r, 0, (size_t)count);
        MPI_Scatter(s, count, MPI_BYTE, r, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        ok = r[0] == ((rank + 1) & 0xff) && r[count - 1] == ((rank + 1) & 0xff);
    } else if (c == COLL_ALLTOALL) {
        /* Block j of rank i holds (i + 2j + 1) & 0xff. */
        unsigned char *s = sbuf, *r = rbuf;
        for (int j = 0; j < nprocs; j++) memset(s + (size_t)j * (size_t)count, (rank + 2 * j + 1) & 0xff, (size_t)count);
        memset(r, 0, (size_t)count * (size_t)nprocs);
        MPI_Alltoall(s, count, MPI_BYTE, r, count, MPI_BYTE, MPI_COMM_WORLD);
        for (int i = 0; i < nprocs && ok; i++) {
            size_t at = (size_t)i * (size_t)count;
            ok = r[at] == ((i + 2 * rank + 1) & 0xff) && r[at + (size_t)count - 1] == ((i + 2 * rank + 1) & 0xff);
        }
    } else if (c == COLL_ALLGATHER) {
        unsigned char *s = sbuf, *r = rbuf;
        memset(s, (rank + 1) & 0xff, (size_t)count);
        memset(r, 0, (size_t)count * (size_t)nprocs);
        MPI_Allgather(s, count, MPI_BYTE, r, count, MPI_BYTE, MPI_COMM_WORLD);
        for (int i = 0; i < nprocs && ok; i++) {
            size_t at = (size_t)i * (size_t)count;
            ok = r[at] == ((i + 1) & 0xff) && r[at + (size_t)count - 1] == ((i + 1) & 0xff);
        }
    }
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_ok) die("sanity check of the collective's result failed");
}

static double run_loop(enum coll c, void *sbuf, void *rbuf, int count, int iters) {
    unsigned char *b = sbuf;
    int32_t *s = sbuf;
    double t0 = MPI_Wtime();
    switch (c) {
    case COLL_BARRIER:
        for (int it = 0; it < iters; it++) MPI_Barrier(MPI_COMM_WORLD);
        break;
    case COLL_BCAST:
        for (int it = 0; it < iters; it++) {
            if (rank == 0) b[it % count] = (unsigned char)it;
            MPI_Bcast(b, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        }
        break;
    case COLL_REDUCE:
        for (int it = 0; it < iters; it++) {
            s[it % count] = it & 0xff;
            MPI_Reduce(s, rbuf, count, MPI_INT32_T, MPI_SUM, 0, MPI_COMM_WORLD);
        }
        break;
    case COLL_ALLREDUCE:
        for (int it = 0; it < iters; it++) {
            s[it % count] = it & 0xff;
            MPI_Allreduce(s, rbuf, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        }
        break;
    case COLL_ALLGATHER:
        for (int it = 0; it < iters; it++) {
            b[it % count] = (unsigned char)it;
            MPI_Allgather(b, count, MPI_BYTE, rbuf, count, MPI_BYTE, MPI_COMM_WORLD);
        }
        break;
    case COLL_REDUCE_SCATTER:
        for (int it = 0; it < iters; it++) {
            s[it % count] = it & 0xff;
            MPI_Reduce_scatter_block(s, rbuf, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        }
        break;
    case COLL_GATHER:
        for (int it = 0; it < iters; it++) {
            b[it % count] = (unsigned char)it;
            MPI_Gather(b, count, MPI_BYTE, rbuf, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        }
        break;
    case COLL_SCATTER:
        for (int it = 0; it < iters; it++) {
            if (rank == 0) b[it % count] = (unsigned char)it;
            MPI_Scatter(b, count, MPI_BYTE, rbuf, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        }
        break;
    case COLL_ALLTOALL:
        for (int it = 0; it < iters; it++) {
            b[it % count] = (unsigned char)it;
            MPI_Alltoall(b, count, MPI_BYTE, rbuf, count, MPI_BYTE, MPI_COMM_WORLD);
        }
        break;
    case COLL_SCAN:
        for (int it = 0; it < iters; it++) {
            s[it % count] = it & 0xff;
            MPI_Scan(s, rbuf, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        }
        break;
    case COLL_EXSCAN:
        for (int it = 0; it < iters; it++) {
            s[it % count] = it & 0xff;
            MPI_Exscan(s, rbuf, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        }
        break;
    case COLL_COUNT:
        break;
    }
    return MPI_Wtime() - t0;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void measure(enum coll c, size_t bytes, int iters, int warmup, int repeats) {
    int count = 0;
    void *sbuf = NULL, *rbuf = NULL;
    if (c == COLL_BCAST) {
        if (bytes > INT32_MAX) die("size too large for an int count");
        count = (int)bytes;
        sbuf = alloc_touched(bytes);
    } else if (c == COLL_REDUCE || c == COLL_ALLREDUCE || c == COLL_SCAN || c == COLL_EXSCAN) {
        size_t n = bytes / 4 ? bytes / 4 : 1;
        if (n > INT32_MAX) die("size too large for an int count");
        count = (int)n;
        sbuf = alloc_touched(n * 4);
        rbuf = alloc_touched(n * 4);
    } else if (c == COLL_REDUCE_SCATTER) {
        size_t n = bytes / 4 ? bytes / 4 : 1;
        if (n > INT32_MAX / (size_t)nprocs) die("size too large for an int count");
        count = (int)n;
        sbuf = alloc_touched(n * 4 * (size_t)nprocs);
        rbuf = alloc_touched(n * 4);
    } else if (c == COLL_ALLGATHER || c == COLL_GATHER || c == COLL_SCATTER) {
        if (bytes > INT32_MAX || bytes > SIZE_MAX / (size_t)nprocs) die("size too large for an int count");
        count = (int)bytes;
        /* The whole vector: allgather's and gather's result, scatter's source. */
        sbuf = alloc_touched(c == COLL_SCATTER ? bytes * (size_t)nprocs : bytes);
        rbuf = alloc_touched(c == COLL_SCATTER ? bytes : bytes * (size_t)nprocs);
    } else if (c == COLL_ALLTOALL) {
        if (bytes > INT32_MAX || bytes > SIZE_MAX / (size_t)nprocs) die("size too large for an int count");
        count = (int)bytes;
        sbuf = alloc_touched(bytes * (size_t)nprocs);
        rbuf = alloc_touched(bytes * (size_t)nprocs);
    }
    check_once(c, sbuf, rbuf, count);

    MPI_Barrier(MPI_COMM_WORLD);
    run_loop(c, sbuf, rbuf, count, warmup);
    double means[64];
    for (int r = 0; r < repeats; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double elapsed = run_loop(c, sbuf, rbuf, count, iters);
        means[r] = iters ? elapsed * 1e6 / iters : 0.0;
    }
    qsort(means, (size_t)repeats, sizeof means[0], compare_doubles);

    double mean_us = means[repeats / 2], mn, mx, sum;
    MPI_Reduce(&mean_us, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mean_us, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mean_us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%zu %.3f %.3f %.3f %d\n", bytes, sum / nprocs, mn, mx, iters);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    if (argc != 4 && argc != 7 && argc != 8 && argc != 9) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: %s <barrier|bcast|reduce|allreduce|allgather|gather|scatter|reduce-scatter|alltoall|scan|exscan> <min_bytes> <max_bytes>"
                    " [iterations_small iterations_large large_threshold_bytes [warmup [repeats]]]\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }
    int c = -1;
    for (int i = 0; i < COLL_COUNT; i++)
        if (strcmp(argv[1], coll_names[i]) == 0) c = i;
    if (c < 0) die("collective must be one of barrier, bcast, reduce, allreduce, allgather, gather, scatter, reduce-scatter, alltoall, scan,"
                   " exscan");

    size_t min_bytes, max_bytes, large = 8192;
    int iters_small = 1000, iters_large = 100, warmup = -1, repeats = 1;
    if (parse_size(argv[2], &min_bytes) || parse_size(argv[3], &max_bytes)) die("bad byte size");
    if (argc >= 7 && (parse_int(argv[4], &iters_small) || parse_int(argv[5], &iters_large) ||
                      parse_size(argv[6], &large)))
        die("bad iterations / threshold");
    if (argc >= 8 && parse_int(argv[7], &warmup)) die("bad warmup count");
    if (argc == 9 && (parse_int(argv[8], &repeats) || repeats < 1 || repeats > 64)) die("repeats must be 1…64");
    if (c != COLL_BARRIER && (min_bytes == 0 || min_bytes > max_bytes))
        die("need 1 <= min_bytes <= max_bytes");

    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, "\r\n")] = '\0';
        print_mca_settings((enum coll)c);
        printf("# coll_latency %s p=%d %s\n", coll_names[c], nprocs, ver);
        fflush(stdout);
    }

    if (c == COLL_BARRIER) {
        int w = warmup >= 0 ? warmup : (iters_small / 10 > 10 ? iters_small / 10 : 10);
        measure(COLL_BARRIER, 0, iters_small, w, repeats);
    } else {
        for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
            int iters = bytes > large ? iters_large : iters_small;
            int w = warmup >= 0 ? warmup : (iters / 10 > 10 ? iters / 10 : 10);
            measure((enum coll)c, bytes, iters, w, repeats);
            if (bytes > SIZE_MAX / 2) break;
        }
    }

    MPI_Finalize();
    return 0;
}
