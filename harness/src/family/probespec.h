/*
 * probespec.h — the stage-probe table of each mixer family (backend.h struct mc_probe,
 * docs/scenarios.md §1.3, §3.6): the stages a family's probes hold, in pipeline order, with their
 * shapes. Read by the golden reader (/probes) and the probing rerun (scenario/probes.h).
 */
#ifndef MC_PROBESPEC_H
#define MC_PROBESPEC_H

#include <stdint.h>

#include "family/family.h"
#include "mixcheck/backend.h"

#define MC_PROBE_MAX 8
#define MC_PROBE_NAME_LEN 16

/* One stage a family's probes hold: [B][L] followed by dims [ndim]. */
struct mc_probe_spec {
    const char *name;
    int ndim;
    int64_t dims[3];
    const char *dim_names[3];
};

/* The family's stages in pipeline order into out; returns their count. */
int mc_probe_specs(const struct mc_family_config *cfg, struct mc_probe_spec out[MC_PROBE_MAX]);

/* 1 when a backend implements stage probes (the cap and both entries). */
int mc_probes_capable(const struct mc_backend_ops *ops);

#endif
