/*
 * probe.h — the stage probes of the cpu backend (backend.h struct mc_probe, MC_CAP_PROBES): a store
 * each family's model holds, allocated by the first probe_enable. While recording is on, the family's
 * forward copies its intermediates (always f32: the backend computes in f32) out of its whole-call
 * buffers; off (the default), a forward pays one NULL test per stage. Only the plain forward records:
 * the packed call reports none, and a recording forward is not streamed (stream.h) so that its probes
 * cover the whole call.
 */
#ifndef MC_KERNELS_CPU_PROBE_H
#define MC_KERNELS_CPU_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

#define MC_CPU_MAX_PROBES 8

struct mc_cpu_probes {
    int on;
    int count;
    enum mc_backend_status failed; /* MC_BACKEND_OK, or why the last forward could not record them */
    struct mc_probe probes[MC_CPU_MAX_PROBES];
    float *buf[MC_CPU_MAX_PROBES];
    size_t cap[MC_CPU_MAX_PROBES];
};

/* 1 while p records (p may be NULL). */
int mc_cpu_probes_on(const struct mc_cpu_probes *p);
/* Forgets the probes of the last forward (every ops forward and packed call starts with it). */
void mc_cpu_probes_reset(struct mc_cpu_probes *p);
void mc_cpu_probes_free(struct mc_cpu_probes *p);

/* A zeroed f32 buffer of dims [ndim] recorded as probe `name` (a string literal); NULL when p is
 * not recording or memory ran out (probe_read then says so). */
float *mc_cpu_probe_add(struct mc_cpu_probes *p, const char *name, int ndim, const int64_t *dims);

/* dst[r][0..n) = src[r*stride + 0..n) for the rows [rows] that mask (NULL: all) marks real. */
void mc_cpu_probe_rows(float *dst, int64_t n, const float *src, int64_t stride, int64_t rows, const uint8_t *mask);

/* The ops entries; who prefixes messages ("mamba2 cpu"). */
enum mc_backend_status mc_cpu_probe_enable(struct mc_cpu_probes **p, int32_t on, const char *who, struct mc_msg *msg);
enum mc_backend_status mc_cpu_probe_read(const struct mc_cpu_probes *p, const char *who, const struct mc_probe **probes,
                                         int32_t *count, struct mc_msg *msg);

/* Defines a family's probe_enable and probe_read entries, static, as PREFIX_probe_enable and
 * PREFIX_probe_read, over the store in its model's `probes` member; `who` for the messages (the
 * expanding file includes common.h for mc_cpu_fail). */
#define MC_CPU_PROBE_OPS(prefix, who)                                                                              \
    static enum mc_backend_status prefix##_probe_enable(struct mc_model *model, int32_t on, struct mc_msg *msg)   \
    {                                                                                                              \
        return mc_cpu_probe_enable(model ? &model->probes : NULL, on, who, msg);                                  \
    }                                                                                                              \
    static enum mc_backend_status prefix##_probe_read(struct mc_model *model, const struct mc_probe **probes,     \
                                                      int32_t *count, struct mc_msg *msg)                         \
    {                                                                                                              \
        if (!model)                                                                                                \
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: probe_read needs a model", who);                     \
        return mc_cpu_probe_read(model->probes, who, probes, count, msg);                                         \
    }

#endif
