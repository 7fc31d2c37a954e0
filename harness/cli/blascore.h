/*
 * blascore.h — which OpenBLAS kernel set ("core") the mixcheck process runs on.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from CPUID when the library loads. A
 * release that does not know the CPU model falls back to its Prescott (SSE3) kernels even on a CPU with
 * AVX-512: OpenBLAS 0.3.21 does so on recent Xeons (seen on a KVM "Intel Xeon Processor", model 207),
 * where its sgemm then runs 4-5x below the SkylakeX kernels on the same machine. The choice can only be
 * changed before the library loads, through OPENBLAS_CORETYPE, so mixcheck checks it first thing in
 * main() and, when it is such a fallback, re-executes itself once with OPENBLAS_CORETYPE set to the
 * core the CPU supports. A user's OPENBLAS_CORETYPE (any value, even empty) is always left alone.
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

/* Call first in main(): when OPENBLAS_CORETYPE is unset and mc_blas_core_upgrade() names a better core
 * for this CPU, sets OPENBLAS_CORETYPE (and MIXCHECK_BLAS_CORE_DETECTED, for the note below) and
 * re-executes /proc/self/exe with the same argv; returns only when nothing is to be done or the
 * exec failed (then the process goes on with the detected core). */
void mc_blas_core_select(char **argv);

/* One line for reports: the core in use and, when mixcheck chose it, why, e.g.
 * "SkylakeX (set by mixcheck: OpenBLAS 0.3.21 detected Prescott on this AVX-512 CPU)". */
void mc_blas_core_describe(char *buf, unsigned long len);

#endif
