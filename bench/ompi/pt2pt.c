/*
 * pt2pt: the MPI library's point-to-point latency and bandwidth between ranks 0 and 1, OSU-style
 * (osu_latency: a ping-pong of MPI_Send/MPI_Recv, one-way latency = half a round trip; osu_bw:
 * `window` MPI_Isend of one size, MPI_Waitall, a 4-byte acknowledgement; bandwidth = the bytes of
 * a window over its time), with the same sizes, iterations and window as `topocoll bench --pt2pt`.
 *
 * Usage: pt2pt <iterations> <window> <bytes>...
 * Output (rank 0, stdout):
 *   # pt2pt <MPI library version, first line>
 *   latency <bytes> <one-way us>
 *   bandwidth <bytes> <MB/s>
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

static void ping_pong(char *buf, int bytes, int n) {
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
}

static void windows(char **bufs, int bytes, int window, MPI_Request *reqs, int n) {
    char ack[4] = {0};
    for (int k = 0; k < n; k++) {
        if (rank == 0) {
            for (int i = 0; i < window; i++) MPI_Isend(bufs[i], bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[i]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, 4, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            for (int i = 0; i < window; i++) MPI_Irecv(bufs[i], bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[i]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(ack, 4, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: pt2pt <iterations> <window> <bytes>...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int iterations_small = atoi(argv[1]);
    const int window = atoi(argv[2]);
    if (rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(version, &len);
        char *nl = strchr(version, '\n');
        if (nl != NULL) *nl = '\0';
        printf("# pt2pt %s\n", version);
    }
    for (int a = 3; a < argc; a++) {
        const int bytes = atoi(argv[a]);
        const int iterations = bytes > 65536 ? (iterations_small / 10 > 10 ? iterations_small / 10 : 10) : iterations_small;
        char *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
        memset(buf, 1, bytes > 0 ? (size_t)bytes : 1);
        MPI_Barrier(MPI_COMM_WORLD);
        ping_pong(buf, bytes, iterations / 10 > 2 ? iterations / 10 : 2);
        double start = MPI_Wtime();
        ping_pong(buf, bytes, iterations);
        const double latency = (MPI_Wtime() - start) * 1e6 / iterations / 2;
        if (rank == 0) printf("latency %d %.3f\n", bytes, latency);
        free(buf);

        const int n = iterations / 10 > 3 ? iterations / 10 : 3;
        char **bufs = malloc(sizeof(char *) * (size_t)window);
        for (int i = 0; i < window; i++) {
            bufs[i] = malloc(bytes > 0 ? (size_t)bytes : 1);
            memset(bufs[i], 1, bytes > 0 ? (size_t)bytes : 1);
        }
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)window);
        MPI_Barrier(MPI_COMM_WORLD);
        windows(bufs, bytes, window, reqs, 1);
        start = MPI_Wtime();
        windows(bufs, bytes, window, reqs, n);
        const double seconds = MPI_Wtime() - start;
        if (rank == 0) printf("bandwidth %d %.3f\n", bytes, (double)bytes * window * n / seconds / 1e6);
        for (int i = 0; i < window; i++) free(bufs[i]);
        free(bufs);
        free(reqs);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
