/*
 * determinism.h — the determinism scenario (docs/scenarios.md §2): every call a serving engine makes,
 * each run twice on copies of the same cache, at one thread and at the thread count of the run, and
 * compared bit for bit: the two runs of a call at one thread count, and the call at the second thread
 * count with the same call at one thread.
 *
 * The calls: a prefill without a cache, a prefill into a fresh cache, a multi-token forward and a
 * decode step from the primed cache; and where the backend has forward_packed, the packed call (fresh
 * sequences on a zero pool), the mixed step (one-token and short prefills, decodes and multi-token
 * forwards from the slots the packed call filled) and the slot-pool call (a fresh sequence on a
 * NaN-poisoned slot, fresh ones over other sequences' states, resuming ones, a zero-length one, on a
 * pool whose other rows hold NaN or states). The thread counts are 1 and ctx->threads (2 when the
 * run gives none) for a backend with MC_CAP_THREADS; a backend without it runs once, at ctx->threads.
 *
 * Every first run is also compared with the golden (the packed calls' outputs where the golden has no
 * padding: a packed call has no mask). The first run must leave the cache it was copied from alone
 * ("snapshot"). Any bit that differs is a "determinism" failure (verdict nondeterministic), and
 * s->nondeterminism names the call and the thread counts.
 */
#ifndef MC_DETERMINISM_H
#define MC_DETERMINISM_H

#include "scenario/session.h"

/* Runs the determinism scenario on an open session (its spec's `prefill` in [1, L-2]). */
void mc_determinism_run(struct mc_session *s);

#endif
