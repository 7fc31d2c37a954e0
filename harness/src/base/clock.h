/* clock.h — the harness's one monotonic clock, for check and run durations. */
#ifndef MC_CLOCK_H
#define MC_CLOCK_H

/* Seconds on CLOCK_MONOTONIC (only differences mean anything). */
double mc_clock_now_s(void);

#endif
