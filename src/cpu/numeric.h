/* numeric.h -- internals of the CPU NUMERIC family (RNGBitGenerator, FFT, BatchNorm), shared by
 * numeric.c (dispatch, row conversions), rng.c, fft.c, batchnorm.c and the tests. */
#ifndef LATHE_CPU_NUMERIC_H
#define LATHE_CPU_NUMERIC_H

#include "cpu.h"

/* Philox4x32-10 (Salmon et al., SC'11): one 128-bit block from a 128-bit counter and a 64-bit
 * key, words least significant first. Pure function; any thread. */
void lathe_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* 1-D discrete Fourier transform of x (n elements, in place), forward (e^{-2 pi i jk/n}) or
 * inverse (e^{+2 pi i jk/n}, scaled by 1/n). For tests and for the kernels. */
lathe_status_t lathe_fft_1d(lathe_c128 *x, int64_t n, bool inverse);

/* Contiguous conversions between a float dtype's storage and double (real) or lathe_c128
 * (complex). Return NULL for dtypes without one. src and dst are borrowed. */
typedef void (*lathe_num_load_fn)(const void *src, int64_t n, double *dst);
typedef void (*lathe_num_store_fn)(const double *src, int64_t n, void *dst);
typedef void (*lathe_num_cload_fn)(const void *src, int64_t n, lathe_c128 *dst);
typedef void (*lathe_num_cstore_fn)(const lathe_c128 *src, int64_t n, void *dst);
lathe_num_load_fn lathe_num_real_loader(lathe_dtype dt);
lathe_num_store_fn lathe_num_real_storer(lathe_dtype dt);
lathe_num_cload_fn lathe_num_complex_loader(lathe_dtype dt);
lathe_num_cstore_fn lathe_num_complex_storer(lathe_dtype dt);

/* The kernels behind lathe_cpu_run_numeric (same contract). */
lathe_status_t lathe_cpu_rng_bit_generator(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                           lathe_tensor **out);
lathe_status_t lathe_cpu_fft(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);
lathe_status_t lathe_cpu_batch_norm(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out);

#endif
