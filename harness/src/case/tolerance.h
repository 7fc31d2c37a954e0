/*
 * tolerance.h — tolerance profiles (cases/FORMAT.md): atol / rtol per device, dtype and tensor, each
 * with its `why`; the loader and the lookup a check's comparisons use.
 */
#ifndef MC_TOLERANCE_H
#define MC_TOLERANCE_H

#include <stddef.h>

#include "base/error.h"
#include "case/casenames.h"
#include "case/yamldoc.h"

/* An element passes iff |a - b| <= atol + atol_scale * M + rtol * |b|, M the tensor's magnitude: the largest
 * |b| of the array it is compared in, or `magnitude` when that is larger (verdict/compare.h). atol_scale
 * states an absolute tolerance in units of the tensor's own magnitude, so that one profile holds for
 * weights of any scale (0: atol alone). */
struct mc_tolerance {
    double atol;
    double rtol;
    double atol_scale;
    /* not read from a profile: the magnitude a check knows for the tensor before comparing it (a model
     * case: its largest |value| anywhere in the golden); M is the larger of it and the array's own */
    double magnitude;
};

/* One (device, dtype, tensor) entry of a profile; tensor MC_TENSOR_COUNT means the dtype's default. */
struct mc_tolerance_entry {
    char *device;
    enum mc_dtype dtype;
    int tensor; /* enum mc_tensor_kind, or MC_TENSOR_COUNT for `default` */
    struct mc_tolerance tol;
    char *why;
};

struct mc_tolerance_profile {
    char *path;
    char *name;
    struct mc_tolerance_entry *entries;
    int n_entries;
};

enum mc_err_code mc_tolerance_load(const char *path, struct mc_tolerance_profile *p, struct mc_error *err);
/* As mc_tolerance_load, from memory (see mc_case_load_buffer). */
enum mc_err_code mc_tolerance_load_buffer(const char *path, const void *data, size_t len,
                                          struct mc_tolerance_profile *p, struct mc_error *err);
void mc_tolerance_free(struct mc_tolerance_profile *p);

/* 1 when the profile has any entry for (device, dtype). */
int mc_tolerance_covers(const struct mc_tolerance_profile *p, const char *device, enum mc_dtype dtype);

/* The tolerance for (device, dtype, tensor): the tensor's own entry, else the dtype's `default`.
 * MC_ERR_INPUT naming the profile file when neither exists. */
enum mc_err_code mc_tolerance_lookup(const struct mc_tolerance_profile *p, const char *device, enum mc_dtype dtype,
                                     enum mc_tensor_kind tensor, struct mc_tolerance *out, struct mc_error *err);

/* As mc_tolerance_load; ref (may be NULL) names the key that pointed at path, so that a profile
 * that cannot be read is reported at that key. */
enum mc_err_code mc_tolerance_load_ref(const char *path, const struct mc_yaml_ref *ref, struct mc_tolerance_profile *p,
                                       struct mc_error *err);

#endif
