/* mpi_allreduce.c -- the Open MPI side of docs/BENCHMARKS.md "AllReduce across the processes of a job":
 * the loop of job_allreduce_bench.c over MPI_Allreduce. Not built by make (needs libopenmpi-dev):
 *   mpicc -O2 bench/mpi_allreduce.c -o build/mpi_allreduce && mpirun --oversubscribe -np 2 build/mpi_allreduce */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, p;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &p);
  size_t max = (size_t)256 << 20;
  float *buf = malloc(max);
  for (size_t i = 0; i < max / 4; i++) buf[i] = 1.0f;
  if (p == 0) printf("Open MPI AllReduce, %d processes, Float32 sum\n%10s %10s %12s\n", P, "MB", "ms", "busbw GB/s");
  for (size_t mb = 1; mb <= 256; mb *= 4) {
    int n = (int)(mb << 18);
    int reps = mb <= 4 ? 10 : mb <= 64 ? 4 : 2;
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double dt = (MPI_Wtime() - t0) / reps;
    if (p == 0) printf("%10zu %10.2f %12.3f\n", mb, dt * 1e3, (double)(mb << 20) * 2.0 * (P - 1) / P / dt / 1e9);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
