/*
 * cpu.h — the optimized CPU backend ("cpu", device "cpu"): one ops struct per family, each validated
 * against the reference (tests/cpu) before it is timed. f32/bf16/f16 storage, f32 compute and cache,
 * OpenBLAS sgemm for the projections and the chunk matrix products, pthreads over (batch, head).
 */
#ifndef MC_KERNELS_CPU_H
#define MC_KERNELS_CPU_H

#include "mixcheck/backend.h"

/* Mamba2 mixer, chunked SSD (mixers.md §2.4) from the cached state. Static storage. */
const struct mc_backend_ops *mc_cpu_mamba2_ops(void);

/* Mamba1 mixer, vectorized selective scan (mixers.md §3.3, §A.1). Static storage. */
const struct mc_backend_ops *mc_cpu_mamba1_ops(void);

/* LFM2 ShortConv mixer, fused B⊙x → conv → C⊙ (mixers.md §5). Static storage. */
const struct mc_backend_ops *mc_cpu_shortconv_ops(void);

/* Gated DeltaNet mixer, chunked gated delta rule (mixers.md §4.4) from the cached state, both projection
 * layouts. Static storage. */
const struct mc_backend_ops *mc_cpu_gdn_ops(void);

#endif
