/*
 * bench_python.h — `mixcheck bench --python-overhead`: the cost of the Python backend adapter itself
 * (harness/src/exec/pybackend.c), measured with a Python backend that does no math
 * (python/mixcheck_backend/bench.py: y = x) against a C backend doing the same copy, in one process.
 */
#ifndef MC_BENCH_PYTHON_H
#define MC_BENCH_PYTHON_H

/* 1 when argv asks for this mode. */
int mc_bench_python_wanted(int argc, char **argv);
/* Runs it; the process exit code (0 measured, 1 a run failed or its output was wrong, 2 usage). */
int mc_bench_python(int argc, char **argv);

#endif
