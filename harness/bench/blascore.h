/*
 * blascore.h — which OpenBLAS kernel set ("core") the mixcheck process runs on.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from CPUID when the library loads. A
 * release that does not know the CPU model falls back to its Prescott (SSE3) kernels even on a CPU with
 * AVX-512: OpenBLAS 0.3.21 does so on recent Xeons (seen on a KVM "Intel Xeon Processor", model 207),
 * where its sgemm then runs 4-5x below the SkylakeX kernels on the same machine. The choice can only be
 * changed before the library loads, through OPENBLAS_CORETYPE, so mixcheck checks it first thing in
 * main() and, when it is such a fallback, re-executes itself once with OPENBLAS_CORETYPE set to the
 * core the CPU supports. A user's OPENBLAS_CORETYPE (any value, even empty) is always left alone. The
 * same re-exec starts OpenBLAS single-threaded unless the user set its thread count (below).
 */
#ifndef MC_CLI_BLASCORE_H
#define MC_CLI_BLASCORE_H

/* What the CPU and OS support (instructions and the register state saved by the OS). */
struct mc_blas_cpu {
    int avx512; /* AVX-512 F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use */
    int avx2_fma; /* AVX2 and FMA: Haswell kernels */
};

/* The core to ask for instead of `detected` (openblas_get_corename()), or NULL to keep it: only a
 * pre-AVX2 fallback core (Prescott, Core2, Penryn, Dunnington, Nehalem, Atom, Sandybridge, case-
 * insensitive) on a CPU that supports more is replaced, by "SkylakeX" or "Haswell". Pure. */
const char *mc_blas_core_upgrade(const char *detected, const struct mc_blas_cpu *cpu);

/* Call first in main(). Re-executes /proc/self/exe once with the same argv when either of these is
 * to be set, and returns only when nothing is (or the exec failed: the process goes on as loaded):
 *   - OPENBLAS_CORETYPE, when unset and mc_blas_core_upgrade() names a better core for this CPU
 *     (MIXCHECK_BLAS_CORE_DETECTED keeps what OpenBLAS chose, for the note below);
 *   - OPENBLAS_NUM_THREADS=1, when none of OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, OMP_NUM_THREADS is
 *     set. mixcheck brings its own parallelism (a process per check, the cpu backend's workers, each
 *     calling single-threaded sgemm), and an OpenBLAS pool started with more threads slows those
 *     calls even after openblas_set_num_threads(1) (the Mamba2 core at ggml's SSM_SCAN shape: ~29k
 *     against ~45k tokens/s here). `mixcheck bench` raises it for its sgemm baseline
 *     (openblas_set_num_threads(N), which grows the pool). */
void mc_blas_core_select(char **argv);

/* One line for reports: the version, the kernels in use and, when mixcheck chose them, why, and how the
 * thread pool started, e.g. "OpenBLAS 0.3.21 SkylakeX kernels (set by mixcheck: ...); thread pool
 * started single-threaded (OPENBLAS_NUM_THREADS=1 set by mixcheck; set it to choose)". */
void mc_blas_core_describe(char *buf, unsigned long len);

#endif
