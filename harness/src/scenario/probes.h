/*
 * probes.h — the stage-probe rerun (backend.h struct mc_probe, docs/scenarios.md §1.3, §3.6). A check
 * that fails on a backend with MC_CAP_PROBES is run once more with probes on (mc_scenario_run, which
 * puts mc_probe_hooks in the check's context); during that run every forward's probes are compared with
 * the golden's /probes (a full-sequence prefill from a zero cache on the golden's inputs) or with the
 * reference backend's probes for the same call on the same inputs and the same cache (exported from
 * the backend before the call), and the first stage, in pipeline order (family/probespec.h), of the
 * first forward that leaves tolerance is recorded in the check result (verdict/check.h).
 */
#ifndef MC_PROBES_H
#define MC_PROBES_H

#include <stdint.h>

#include "family/probespec.h"
#include "scenario/session.h"

/* The hooks the session calls around each model and forward of a probing rerun (session.h). */
extern const struct mc_session_probe_hooks mc_probe_hooks;

#endif
