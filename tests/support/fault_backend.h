/*
 * fault_backend.h — test support: wraps any backend with a cache fault injected through the backend
 * interface alone (cache_export / cache_import), so the same fault applies to every family:
 *   FAULT_DROP_STATE  the recurrent state is zeroed before every multi-token forward on a primed
 *                     cache (bug class 8.2b: state reset, conv window carried);
 *   FAULT_DROP_CONV   the conv window is zeroed there instead (8.2a: zero conv context).
 * The wrapper keeps the inner backend's name, family and device, so bundled cases run it unchanged.
 * One wrapper at a time (the inner backend is process-global).
 */
#ifndef MC_TEST_FAULT_BACKEND_H
#define MC_TEST_FAULT_BACKEND_H

#include "mixcheck/backend.h"

enum fault_kind {
    FAULT_DROP_STATE,
    FAULT_DROP_CONV,
};

/* An ops struct that forwards to `inner` with `kind` injected. */
struct mc_backend_ops fault_backend(const struct mc_backend_ops *inner, enum fault_kind kind);

#endif
