/*
 * blascore.c — the OpenBLAS core selection of blascore.h: the pure upgrade rule, the CPU probe and the
 * one-time re-exec.
 */
#include "blascore.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MC_BLAS_DETECTED_ENV "MIXCHECK_BLAS_CORE_DETECTED" /* the core OpenBLAS chose, when we replaced it */
#define MC_BLAS_THREADS_ENV "MIXCHECK_BLAS_THREADS_SET"    /* OPENBLAS_NUM_THREADS=1 is ours */
#define MC_BLAS_REEXEC_ENV "MIXCHECK_BLAS_REEXEC"          /* set in the re-executed process */

const char *mc_blas_core_upgrade(const char *detected, const struct mc_blas_cpu *cpu)
{
    /* OpenBLAS's x86-64 cores older than Haswell: what an unknown model falls back to */
    static const char *const fallback[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                           "Sandybridge"};
    if (!detected || !cpu)
        return NULL;
    int is_fallback = 0;
    for (size_t i = 0; i < sizeof fallback / sizeof fallback[0]; i++)
        if (strcasecmp(detected, fallback[i]) == 0)
            is_fallback = 1;
    if (!is_fallback)
        return NULL;
    if (cpu->avx512)
        return "SkylakeX";
    if (cpu->avx2_fma)
        return "Haswell";
    return NULL;
}

static void probe_cpu(struct mc_blas_cpu *cpu)
{
    memset(cpu, 0, sizeof *cpu);
#if defined(__x86_64__) && defined(__GNUC__)
    /* libgcc's probe also checks that the OS saves the AVX / AVX-512 register state (XCR0) */
    __builtin_cpu_init();
    cpu->avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
    cpu->avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
}

/* OpenBLAS takes its thread count from the first of these that is set. */
static int blas_threads_set(void)
{
    return getenv("OPENBLAS_NUM_THREADS") || getenv("GOTO_NUM_THREADS") || getenv("OMP_NUM_THREADS");
}

void mc_blas_core_select(char **argv)
{
    if (getenv(MC_BLAS_REEXEC_ENV))
        return; /* this is the re-executed process */
    const char *want = NULL, *detected = NULL;
    if (!getenv("OPENBLAS_CORETYPE")) { /* else the user's choice */
        struct mc_blas_cpu cpu;
        probe_cpu(&cpu);
        detected = openblas_get_corename();
        want = mc_blas_core_upgrade(detected, &cpu);
    }
    const int threads = !blas_threads_set();
    if (!want && !threads)
        return;
    if (setenv(MC_BLAS_REEXEC_ENV, "1", 1) != 0 || (want && setenv("OPENBLAS_CORETYPE", want, 1) != 0) ||
        (want && setenv(MC_BLAS_DETECTED_ENV, detected, 1) != 0) ||
        (threads && setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) ||
        (threads && setenv(MC_BLAS_THREADS_ENV, "1", 1) != 0))
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* exec failed: go on as loaded, and say nothing was chosen */
    if (want) {
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv(MC_BLAS_DETECTED_ENV);
    }
    if (threads) {
        unsetenv("OPENBLAS_NUM_THREADS");
        unsetenv(MC_BLAS_THREADS_ENV);
    }
}

void mc_blas_core_describe(char *buf, unsigned long len)
{
    const char *core = openblas_get_corename();
    const char *detected = getenv(MC_BLAS_DETECTED_ENV);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words */
    char version[64] = "OpenBLAS";
    const char *config = openblas_get_config();
    if (config) {
        const char *sp = strchr(config, ' ');
        const char *end = sp ? strchr(sp + 1, ' ') : NULL;
        const size_t n = end ? (size_t)(end - config) : strlen(config);
        snprintf(version, sizeof version, "%.*s", (int)(n < sizeof version ? n : sizeof version - 1), config);
    }
    char kernels[256], threads[128];
    if (detected && coretype && strcasecmp(coretype, core ? core : "") == 0)
        snprintf(kernels, sizeof kernels, "%s kernels (set by mixcheck: %s detected %s, a fallback below what "
                 "this CPU supports; set OPENBLAS_CORETYPE to choose)", core, version, detected);
    else if (coretype)
        snprintf(kernels, sizeof kernels, "%s kernels (OPENBLAS_CORETYPE=%s)", core ? core : "?", coretype);
    else
        snprintf(kernels, sizeof kernels, "%s kernels (detected)", core ? core : "?");
    if (getenv(MC_BLAS_THREADS_ENV))
        snprintf(threads, sizeof threads, "thread pool started single-threaded (OPENBLAS_NUM_THREADS=1 set by "
                 "mixcheck; set it to choose)");
    else
        snprintf(threads, sizeof threads, "thread pool as the environment says");
    snprintf(buf, len, "%s %s; %s", version, kernels, threads);
}
