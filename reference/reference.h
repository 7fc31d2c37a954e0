/*
 * reference.h — the plain-C reference mixers, the specification every other implementation is
 * checked against (STYLE.md convention 1). Each is reached only through its ops struct
 * (mixcheck/backend.h): backend name "reference", device "cpu", dtypes f32 and f64, computing in
 * the model dtype with the exact sequential recurrence (mixers.md §11).
 */
#ifndef MC_REFERENCE_H
#define MC_REFERENCE_H

#include "mixcheck/backend.h"

/* Mamba2 mixer (mixers.md §2, HF Mamba2Mixer with mixcheck's semantics of §A). Static storage. */
const struct mc_backend_ops *mc_reference_mamba2_ops(void);

#endif
