#!/bin/sh
# Builds the Open MPI baseline harnesses into build/bench/ (coll_latency, coll_overlap, pt2pt).
# Exits 0 without building when mpicc is absent, so callers can skip the comparison.
set -eu
here=${0%/*}; [ "$here" = "$0" ] && here=.
root=$(cd "$here/../.." && pwd)
cd "$root"
if ! command -v mpicc >/dev/null 2>&1; then
  echo "bench/ompi/build.sh: mpicc not found; skipping the Open MPI baseline (apt-get install openmpi-bin libopenmpi-dev)" >&2
  exit 0
fi
mkdir -p build/bench
mpicc -O2 -std=c11 -Wall -Wextra -o build/bench/coll_latency bench/ompi/coll_latency.c
echo "built build/bench/coll_latency ($(mpicc --showme:version 2>&1 | head -n 1))"
mpicc -O2 -std=c11 -Wall -Wextra -o build/bench/coll_overlap bench/ompi/coll_overlap.c
echo "built build/bench/coll_overlap"
mpicc -O2 -std=c11 -Wall -Wextra -o build/bench/pt2pt bench/ompi/pt2pt.c
echo "built build/bench/pt2pt"
