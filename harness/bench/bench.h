/*
 * bench.h — `mixcheck bench`: throughput of a backend at a built-in layer shape, gated by the
 * correctness cases of that configuration, with ratios against the reference and against an OpenBLAS
 * sgemm of the same FLOP count measured in the same run. See bench.c and docs/performance.md.
 */
#ifndef MC_CLI_BENCH_H
#define MC_CLI_BENCH_H

#include <stdint.h>

#include "base/error.h"
#include "exec/registry.h"

/* Registers the built-in backends (main.c's list). */
typedef int (*mc_bench_register_fn)(struct mc_registry *reg, struct mc_error *err);

/* Runs `mixcheck bench` (argv[1] == "bench"); returns the process exit code: 0 every configuration
 * measured, 1 a gate refused (a correctness check failed) or a timed run failed, 2 usage or input
 * error, 125 nothing could be tested (the backend has no implementation of the family or dtype). */
int mc_cli_bench(int argc, char **argv, mc_bench_register_fn register_builtins);

/* A whole decimal number in [lo, hi] into out: 0, or -1 (not a number, out of range). The bench's
 * option parser (bench.c, bench_python.c). */
int mc_bench_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);

#endif
