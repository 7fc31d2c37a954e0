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

#define MC_BLAS_DETECTED_ENV "MIXCHECK_BLAS_CORE_DETECTED"

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

void mc_blas_core_select(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE"))
        return; /* the user's choice, or ours after the re-exec */
    struct mc_blas_cpu cpu;
    probe_cpu(&cpu);
    const char *detected = openblas_get_corename();
    const char *want = mc_blas_core_upgrade(detected, &cpu);
    if (!want)
        return;
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0 || setenv(MC_BLAS_DETECTED_ENV, detected, 1) != 0)
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* exec failed: go on with the detected core, and say nothing was chosen */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(MC_BLAS_DETECTED_ENV);
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
    if (detected && coretype && strcasecmp(coretype, core ? core : "") == 0)
        snprintf(buf, len, "%s %s kernels (set by mixcheck: %s detected %s, a fallback below what this CPU "
                 "supports; set OPENBLAS_CORETYPE to choose)", version, core, version, detected);
    else if (coretype)
        snprintf(buf, len, "%s %s kernels (OPENBLAS_CORETYPE=%s)", version, core ? core : "?", coretype);
    else
        snprintf(buf, len, "%s %s kernels (detected)", version, core ? core : "?");
}
