/*
 * bench.c — `mixcheck bench`: tokens/s and GFLOP/s of a backend at a built-in layer shape (or, with
 * --core, of the cpu recurrent core alone), the ratio against the reference and against a plain
 * OpenBLAS sgemm of the same FLOP count measured in the same run, and the peak RSS of each run.
 *
 * Order of a configuration (family, backend, dtype):
 *   1. gate: the family's bundled cases (cases/<family>) for (backend, dtype) through mc_run, each check
 *      isolated in a child; any failed or errored check refuses the timing (exit 1, the checks named).
 *      The reference is gated the same way before it is timed. --core also validates the cpu core
 *      against bench_work.c's plain f64 recurrence at a small shape. There is no way to skip the gate.
 *   2. time: each measured workload (backend, reference, sgemm) runs in its own forked child so its
 *      peak RSS (wait4 → ru_maxrss) is its own: a warm-up run, then --reps runs; the median counts.
 *      The reference runs at --reference-len tokens (default min(L, 1024)) and is compared per token.
 *   3. report: one table line per configuration on stdout; --json FILE with one record each.
 * --packed (layer mode, a backend with MC_CAP_PACKED) times the packed call of serving engines
 * (backend.h: forward_packed) against the batched forward at the same tokens, in ONE child process
 * with the two alternating rep by rep (the same warm caches, the same machine noise): batched is
 * [B][L] (every row real, the batched path's best case), packed the same B·L tokens of x as --seqs
 * sequences of mixed lengths (bench_work.h: mc_bench_packed_lengths) on sparse slots of a pool, every
 * other one continuing from its slot. The report is tokens/s of each and packed/batched.
 * Threads: --threads N (default 2) is mc_model_desc.threads. The cpu kernels parallelise themselves
 * (mc_cpu_parallel_for over tiles and heads, each task calling sgemm), so backend runs set OpenBLAS to
 * one thread (openblas_set_num_threads(1): N OpenBLAS threads under N workers would nest N×N threads);
 * the sgemm baseline runs OpenBLAS itself with N threads (openblas_set_num_threads(N) grows a pool
 * that main's blascore.h re-exec started single-threaded). Both use N cores. The OpenBLAS kernels are
 * blascore.h's choice and are named in the header and the JSON.
 */
#define _DEFAULT_SOURCE /* wait4 */
#define _DEFAULT_SOURCE /* wait4 */
#include "bench.h"
#include "bench_python.h"

#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_work.h"
#include "blascore.h"
#include "case/case.h"
#include "family/family.h"
#include "exec/plugin.h"
#include "run/runner.h"

#define BENCH_MAX_REPS 1000
#define BENCH_SEED 0x6d69786368656b31ull /* fixed: every run times the same inputs */
#define BENCH_DEFAULT_REF_LEN 1024
#define BENCH_GATE_SHOWN 5

/* --family at most this many times (the six families bench times) */
#define BENCH_MAX_FAMILIES 6

struct bench_opts {
    enum mc_family families[BENCH_MAX_FAMILIES];
    int n_families, explicit_family;
    const char *backend;
    enum mc_dtype dtype;
    int64_t len, batch, ref_len;
    int threads, reps, core, packed;
    int64_t seqs; /* --packed: sequences of the packed call */
    int explicit_len, explicit_batch;
    const char *json_path;
    const char *cases_dir;
    const char *plugins[MC_PLUGIN_MAX];
    int n_plugins;
    /* mamba2 shape overrides (0 = the built-in shape) */
    int64_t heads, head_dim, state, groups, chunk;
};

/* One timed workload's result, written by the child through a pipe. */
struct bench_timing {
    int ok;
    char msg[512];
    double median_s, min_s;
    double packed_median_s; /* --packed: the packed call's median, timed in the same child */
    double footprint_bytes;
    int64_t sgemm_n;
    /* /proc/self/status of the child: VmRSS before any setup (libraries and the inherited image), and
     * VmHWM over the timed runs after a reset (clear_refs 5) once setup is done; -1 when unreadable */
    long long baseline_rss_bytes, run_peak_rss_bytes;
};

struct bench_record {
    enum mc_family family;
    char shape[160];
    double flop_tok, flop_tok_exec;
    double tokens_per_s, gflop_per_s, sgemm_gflop_per_s, peak_fraction;
    double ref_tokens_per_s, speedup; /* NAN when the reference was not timed */
    int64_t ref_len, sgemm_n;
    double median_s;
    long long peak_rss_bytes, ref_peak_rss_bytes, sgemm_peak_rss_bytes;
    long long baseline_rss_bytes, run_peak_rss_bytes; /* bench_timing's; -1 unknown */
    double footprint_bytes;
    double packed_tokens_per_s, packed_ratio; /* --packed */
    int64_t packed_min_len, packed_max_len;
};

static int progress_on; /* stdout is a terminal */

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...)
{
    if (!progress_on)
        return;
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("\r\033[K%s", line);
    fflush(stdout);
}

static void progress_clear(void)
{
    if (progress_on) {
        printf("\r\033[K");
        fflush(stdout);
    }
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mixcheck bench [options]   time a backend at the built-in layer shapes\n"
            "\n"
            "  --family F          mamba2, gdn, mamba1, shortconv, lightning or kda (repeatable; default: the\n"
            "                      first four; lightning has no --core)\n"
            "  --backend B         backend to time (default cpu)\n"
            "  --dtype T           f32 (default), bf16, f16, f64\n"
            "  --len L             tokens per row (default 4096)\n"
            "  --batch B           rows (default 1)\n"
            "  --threads N         backend threads and OpenBLAS threads (default 2)\n"
            "  --reps N            timed runs after one warm-up; the median counts (default 3)\n"
            "  --reference-len L   time the reference at L tokens and compare per token\n"
            "                      (default min(len, %d): the reference is sequential, linear in L)\n"
            "  --core              time the cpu recurrent core alone (conv + scan; no projections, no norm)\n"
            "  --shape ssm_scan    ggml's SSM_SCAN perf shape: mamba2 core, N 128, P 64, 48 heads,\n"
            "                      1 group, 512 tokens, chunk 64 (implies --core --family mamba2 --len 512)\n"
            "  --heads H --head-dim P --state N --groups G --chunk Q   mamba2 shape overrides\n"
            "  --packed            time the packed call (forward_packed) against the batched forward at\n"
            "                      the same tokens, alternating in one process; default [8][512] batched\n"
            "                      against 12 sequences of mixed lengths packed\n"
            "  --seqs N            sequences of the packed call (with --packed; default 12)\n"
            "  --json FILE         one record per configuration\n"
            "  --plugin LIB        load backends from a shared library (repeatable)\n"
            "  --cases DIR         where the gate's cases are (default cases; DIR/<family> is run)\n"
            "  --python-overhead   another mode: the Python backend adapter's own cost per forward call\n"
            "                      (mixcheck bench --python-overhead --help)\n"
            "\n"
            "Before a backend is timed at a dtype, the family's cases run for it (the gate); a failed\n"
            "check refuses the timing. exit: 0 measured, 1 refused or a run failed, 2 usage or input\n"
            "error, 125 could not test (no implementation for the family or dtype)\n",
            BENCH_DEFAULT_REF_LEN);
}

int mc_bench_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

enum {
    OPT_FAMILY = 256,
    OPT_BACKEND,
    OPT_DTYPE,
    OPT_LEN,
    OPT_BATCH,
    OPT_THREADS,
    OPT_REPS,
    OPT_REF_LEN,
    OPT_CORE,
    OPT_SHAPE,
    OPT_HEADS,
    OPT_HEAD_DIM,
    OPT_STATE,
    OPT_GROUPS,
    OPT_CHUNK,
    OPT_JSON,
    OPT_PLUGIN,
    OPT_CASES,
    OPT_PACKED,
    OPT_SEQS,
    OPT_HELP,
};

/* 0, 2 on a usage error (message printed), or -1 after --help. */
static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    static const struct option longopts[] = {
        {"family", required_argument, NULL, OPT_FAMILY},   {"backend", required_argument, NULL, OPT_BACKEND},
        {"dtype", required_argument, NULL, OPT_DTYPE},     {"len", required_argument, NULL, OPT_LEN},
        {"batch", required_argument, NULL, OPT_BATCH},     {"threads", required_argument, NULL, OPT_THREADS},
        {"reps", required_argument, NULL, OPT_REPS},       {"reference-len", required_argument, NULL, OPT_REF_LEN},
        {"core", no_argument, NULL, OPT_CORE},             {"shape", required_argument, NULL, OPT_SHAPE},
        {"heads", required_argument, NULL, OPT_HEADS},     {"head-dim", required_argument, NULL, OPT_HEAD_DIM},
        {"state", required_argument, NULL, OPT_STATE},     {"groups", required_argument, NULL, OPT_GROUPS},
        {"chunk", required_argument, NULL, OPT_CHUNK},     {"json", required_argument, NULL, OPT_JSON},
        {"plugin", required_argument, NULL, OPT_PLUGIN},   {"cases", required_argument, NULL, OPT_CASES},
        {"packed", no_argument, NULL, OPT_PACKED},         {"seqs", required_argument, NULL, OPT_SEQS},
        {"help", no_argument, NULL, OPT_HELP},             {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
    o->dtype = MC_DTYPE_F32;
    o->len = 4096;
    o->batch = 1;
    o->threads = 2;
    o->reps = 3;
    o->cases_dir = "cases";
    opterr = 0;
    optind = 2; /* argv[1] is "bench" */
    int c, shape_preset = 0;
    int64_t v = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *name = optind > 1 ? argv[optind - 1] : "?";
        switch (c) {
        case OPT_FAMILY: {
            enum mc_family f = MC_FAMILY_MAMBA2;
            if (mc_family_from_name(optarg, &f) != 0 || f == MC_FAMILY_ATTENTION) {
                fprintf(stderr, "mixcheck bench: --family: %s '%s' (mamba2, mamba1, gdn, shortconv, lightning, kda)\n",
                        f == MC_FAMILY_ATTENTION ? "no benchmark for family" : "unknown family", optarg);
                return 2;
            }
            if (o->n_families == BENCH_MAX_FAMILIES) {
                fprintf(stderr, "mixcheck bench: --family given more than %d times\n", BENCH_MAX_FAMILIES);
                return 2;
            }
            o->families[o->n_families++] = f;
            o->explicit_family = 1;
            break;
        }
        case OPT_BACKEND:
            o->backend = optarg;
            break;
        case OPT_DTYPE:
            if (mc_dtype_from_name(optarg, &o->dtype) != 0) {
                fprintf(stderr, "mixcheck bench: --dtype: unknown dtype '%s' (f64, f32, f16, bf16)\n", optarg);
                return 2;
            }
            break;
        case OPT_CORE:
            o->core = 1;
            break;
        case OPT_PACKED:
            o->packed = 1;
            break;
        case OPT_SHAPE:
            if (strcmp(optarg, "ssm_scan") != 0) {
                fprintf(stderr, "mixcheck bench: --shape: unknown preset '%s' (ssm_scan)\n", optarg);
                return 2;
            }
            shape_preset = 1;
            break;
        case OPT_JSON:
            o->json_path = optarg;
            break;
        case OPT_CASES:
            o->cases_dir = optarg;
            break;
        case OPT_PLUGIN:
            if (o->n_plugins >= MC_PLUGIN_MAX) {
                fprintf(stderr, "mixcheck bench: --plugin: at most %d plugins\n", MC_PLUGIN_MAX);
                return 2;
            }
            o->plugins[o->n_plugins++] = optarg;
            break;
        case OPT_HELP:
            usage(stdout);
            return -1;
        case OPT_LEN:
        case OPT_BATCH:
        case OPT_THREADS:
        case OPT_REPS:
        case OPT_REF_LEN:
        case OPT_HEADS:
        case OPT_HEAD_DIM:
        case OPT_STATE:
        case OPT_GROUPS:
        case OPT_SEQS:
        case OPT_CHUNK: {
            const int64_t hi = c == OPT_REPS ? BENCH_MAX_REPS : c == OPT_THREADS ? 256 : 1 << 24;
            if (mc_bench_parse_i64(optarg, 1, hi, &v) != 0) {
                fprintf(stderr, "mixcheck bench: %s: expected an integer in [1, %lld] (got '%s')\n", name,
                        (long long)hi, optarg);
                return 2;
            }
            switch (c) {
            case OPT_LEN: o->len = v; o->explicit_len = 1; break;
            case OPT_BATCH: o->batch = v; o->explicit_batch = 1; break;
            case OPT_SEQS: o->seqs = v; break;
            case OPT_THREADS: o->threads = (int)v; break;
            case OPT_REPS: o->reps = (int)v; break;
            case OPT_REF_LEN: o->ref_len = v; break;
            case OPT_HEADS: o->heads = v; break;
            case OPT_HEAD_DIM: o->head_dim = v; break;
            case OPT_STATE: o->state = v; break;
            case OPT_GROUPS: o->groups = v; break;
            default: o->chunk = v; break;
            }
            break;
        }
        default:
            fprintf(stderr, "mixcheck bench: unknown or incomplete option '%s' (see mixcheck bench --help)\n", name);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mixcheck bench: unexpected argument '%s' (see mixcheck bench --help)\n", argv[optind]);
        return 2;
    }
    if (shape_preset) {
        if (o->explicit_family && (o->n_families != 1 || o->families[0] != MC_FAMILY_MAMBA2)) {
            fprintf(stderr, "mixcheck bench: --shape ssm_scan is a mamba2 shape\n");
            return 2;
        }
        o->core = 1;
        o->families[0] = MC_FAMILY_MAMBA2;
        o->n_families = 1;
        o->explicit_family = 1;
        o->heads = o->heads ? o->heads : 48;
        o->head_dim = o->head_dim ? o->head_dim : 64;
        o->state = o->state ? o->state : 128;
        o->groups = o->groups ? o->groups : 1;
        /* ggml's op has no chunk length: it is our algorithm's own parameter, and 64 is the fastest of
         * 32..256 at this shape on the machine docs/performance.md measures (its table); --chunk overrides */
        o->chunk = o->chunk ? o->chunk : 64;
        o->len = 512;
    }
    if ((o->heads || o->head_dim || o->state || o->groups) &&
        !(o->n_families == 1 && o->families[0] == MC_FAMILY_MAMBA2)) {
        fprintf(stderr, "mixcheck bench: --heads/--head-dim/--state/--groups need --family mamba2\n");
        return 2;
    }
    if (o->core && strcmp(o->backend, "cpu") != 0) {
        fprintf(stderr, "mixcheck bench: --core times the cpu backend's core entry points; --backend must be cpu\n");
        return 2;
    }
    if (o->core && o->dtype != MC_DTYPE_F32) {
        fprintf(stderr, "mixcheck bench: --core runs in f32 (the cores' compute type)\n");
        return 2;
    }
    if (o->packed && o->core) {
        fprintf(stderr, "mixcheck bench: --packed times the whole layer; it does not combine with --core or --shape\n");
        return 2;
    }
    if (o->packed) {
        /* the same tokens both ways: [8][512] batched against 12 mixed-length sequences packed */
        if (!o->explicit_batch)
            o->batch = 8;
        if (!o->explicit_len)
            o->len = 512;
        if (!o->seqs)
            o->seqs = 12;
        if (o->seqs > o->batch * o->len) {
            fprintf(stderr, "mixcheck bench: --seqs %lld exceeds the %lld tokens\n", (long long)o->seqs,
                    (long long)(o->batch * o->len));
            return 2;
        }
    } else if (o->seqs) {
        fprintf(stderr, "mixcheck bench: --seqs needs --packed\n");
        return 2;
    }
    for (int i = 0; o->core && i < o->n_families; i++)
        if (o->families[i] == MC_FAMILY_LIGHTNING) {
            fprintf(stderr, "mixcheck bench: --core: %s has no cpu core entry (time it in layer mode)\n",
                    mc_family_name(o->families[i]));
            return 2;
        }
    if (o->n_families == 0) {
        const enum mc_family all[4] = {MC_FAMILY_MAMBA2, MC_FAMILY_GDN, MC_FAMILY_MAMBA1, MC_FAMILY_SHORTCONV};
        memcpy(o->families, all, sizeof all);
        o->n_families = 4;
    }
    if (o->ref_len == 0)
        o->ref_len = o->len < BENCH_DEFAULT_REF_LEN ? o->len : BENCH_DEFAULT_REF_LEN;
    return 0;
}

static void bench_shape_for(const struct bench_opts *o, enum mc_family f, struct mc_bench_shape *s)
{
    mc_bench_shape_default(f, s);
    if (f == MC_FAMILY_MAMBA2) {
        struct mc_mamba2_config *c = &s->cfg.m2;
        if (o->heads)
            c->num_heads = o->heads;
        if (o->head_dim)
            c->head_dim = o->head_dim;
        if (o->state)
            c->state_size = o->state;
        if (o->groups)
            c->n_groups = o->groups;
        c->norm_group_size = c->num_heads * c->head_dim;
    }
    if (o->chunk) {
        s->chunk = o->chunk;
        if (f == MC_FAMILY_MAMBA2)
            s->cfg.m2.chunk_size = o->chunk;
        if (f == MC_FAMILY_GDN)
            s->cfg.gdn.chunk_size = o->chunk;
        if (f == MC_FAMILY_LIGHTNING)
            s->cfg.la.block_size = o->chunk;
        if (f == MC_FAMILY_KDA)
            s->cfg.kda.chunk_size = o->chunk;
    }
}

/* ---- the gate ------------------------------------------------------------------------------------ */

struct gate_state {
    int shown, failed;
    char lines[BENCH_GATE_SHOWN][1600];
};

static void gate_on_check(const struct mc_check_result *res, void *user)
{
    struct gate_state *g = user;
    if (res->status != MC_CHECK_FAIL && res->status != MC_CHECK_ERROR)
        return;
    g->failed++;
    if (g->shown >= BENCH_GATE_SHOWN)
        return;
    double worst = 0.0;
    const char *tensor = "";
    for (int t = 0; t < res->n_tensors; t++)
        if (!(res->tensors[t].stats.headroom <= worst)) {
            worst = res->tensors[t].stats.headroom;
            tensor = res->tensors[t].name;
        }
    if (res->status == MC_CHECK_FAIL)
        snprintf(g->lines[g->shown++], sizeof g->lines[0], "%s/%s/%s/%s FAIL: %s headroom %.3g (rerun: mixcheck run %.512s "
                 "--scenario %s --backend %s --dtype %s)",
                 res->case_id, mc_scenario_name(res->scenario), res->backend, mc_dtype_name(res->dtype), tensor, worst,
                 res->case_path, mc_scenario_name(res->scenario), res->backend, mc_dtype_name(res->dtype));
    else
        snprintf(g->lines[g->shown++], sizeof g->lines[0], "%s/%s/%s/%s ERROR: %.400s", res->case_id,
                 mc_scenario_name(res->scenario), res->backend, mc_dtype_name(res->dtype), res->message);
}

static void gate_on_problem(const struct mc_run_problem *p, void *user)
{
    struct gate_state *g = user;
    if (g->shown < BENCH_GATE_SHOWN)
        snprintf(g->lines[g->shown++], sizeof g->lines[0], "%.512s: %.500s", p->path, p->msg);
}

/* Runs cases_dir/<family> for (backend, dtype); 0 when at least one check ran and none failed or
 * errored, else the exit code to refuse with (1 failed, 2 input or usage, 125 nothing ran); prints
 * what it found. */
static int bench_gate(const struct mc_registry *reg, const struct bench_opts *o, enum mc_family family,
                      const char *backend)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", o->cases_dir, mc_family_name(family));
    const char *paths[1] = {path};
    struct mc_run_options opt = {0};
    opt.filter.family = mc_family_name(family);
    opt.filter.backend = backend;
    opt.filter.dtype = mc_dtype_name(o->dtype);
    opt.threads = o->threads;
    opt.isolate = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    opt.jobs = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    opt.timeout_s = 600;
    struct gate_state g = {0};
    struct mc_run_callbacks cb = {.on_check = gate_on_check, .on_problem = gate_on_problem, .user = &g};
    struct mc_run_report rep;
    struct mc_error err = {0};
    progress("gate: %s %s %s (cases in %s) ...", mc_family_name(family), backend, mc_dtype_name(o->dtype), path);
    int code;
    if (mc_run(paths, 1, reg, &opt, &cb, &rep, &err) != MC_ERR_NONE) {
        progress_clear();
        fprintf(stderr, "mixcheck bench: gate for %s %s %s: %s\n", mc_family_name(family), backend,
                mc_dtype_name(o->dtype), err.msg);
        return mc_error_exit_code(err.code);
    }
    progress_clear();
    code = mc_run_exit_code(&rep);
    const int passed = rep.counts[MC_CHECK_PASS];
    if (code == 0 && passed > 0 && g.failed == 0) {
        printf("gate: %-9s %-10s %-4s %d check(s) passed (%s)\n", mc_family_name(family), backend,
               mc_dtype_name(o->dtype), passed, path);
    } else {
        if (code == 0)
            code = passed == 0 ? 125 : 1;
        fprintf(stderr,
                "mixcheck bench: refusing to time %s %s %s: the correctness gate did not pass (%d passed, %d failed "
                "or errored, %d problem(s); exit %d)\n",
                mc_family_name(family), backend, mc_dtype_name(o->dtype), passed, g.failed, rep.n_problems, code);
        for (int i = 0; i < g.shown; i++)
            fprintf(stderr, "  %s\n", g.lines[i]);
        if (passed == 0 && g.failed == 0 && rep.n_problems == 0)
            fprintf(stderr, "  no case of %s ran for backend %s at %s\n", path, backend, mc_dtype_name(o->dtype));
    }
    mc_run_report_free(&rep);
    return code;
}

/* ---- timing in a child --------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void median_min(double *t, int n, double *median, double *min)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *min = t[0];
    *median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The "VmRSS:" / "VmHWM:" line of /proc/self/status in bytes, or -1. */
static long long proc_status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            kb = strtoll(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Resets the process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0: clear_refs "5"). 0 on success. */
static int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    const int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

struct work_job {
    const char *label;
    const struct mc_bench_shape *shape;
    enum mc_bench_impl impl;
    const struct mc_backend_ops *ops;
    enum mc_dtype dtype;
    int64_t batch, len;
    int threads, reps;
};

static void job_work(const void *arg, struct bench_timing *out)
{
    const struct work_job *j = arg;
    struct mc_bench_work *w = NULL;
    double t[BENCH_MAX_REPS];
    /* the parent's freed heap, inherited by the fork, would otherwise be reused by the setup unseen */
    malloc_trim(0);
    out->baseline_rss_bytes = proc_status_bytes("VmRSS:");
    out->run_peak_rss_bytes = -1;
    if (mc_bench_work_init(&w, j->shape, j->impl, j->ops, j->dtype, j->batch, j->len, j->threads, BENCH_SEED, out->msg,
                           sizeof out->msg) != 0)
        return;
    out->footprint_bytes = (double)mc_bench_work_footprint_bytes(w);
    /* the setup's own freed buffers (the bench's weight copies, which the backend copied) go back to the
     * system, then the peak restarts: the run peak is the backend's, over its data and scratch */
    malloc_trim(0);
    const int hwm = reset_peak_rss() == 0;
    for (int r = -1; r < j->reps; r++) {
        progress("%s: %s %d/%d", j->label, r < 0 ? "warm-up" : "rep", r < 0 ? 1 : r + 1, r < 0 ? 1 : j->reps);
        if (mc_bench_work_reset(w, out->msg, sizeof out->msg) != 0)
            goto done;
        const double t0 = now_s();
        if (mc_bench_work_run(w, out->msg, sizeof out->msg) != 0)
            goto done;
        if (r >= 0)
            t[r] = now_s() - t0;
    }
    median_min(t, j->reps, &out->median_s, &out->min_s);
    out->run_peak_rss_bytes = hwm ? proc_status_bytes("VmHWM:") : -1;
    out->ok = 1;
done:
    mc_bench_work_free(w);
}

struct packed_job {
    struct work_job work;
    int64_t seqs;
};

/* --packed: the batched forward and the packed call of the same model and tokens, alternating rep by
 * rep in this one child (warm-up of each first). */
static void job_packed(const void *arg, struct bench_timing *out)
{
    const struct packed_job *pj = arg;
    const struct work_job *j = &pj->work;
    struct mc_bench_work *w = NULL;
    double tb[BENCH_MAX_REPS], tp[BENCH_MAX_REPS], mn = 0.0;
    malloc_trim(0);
    out->baseline_rss_bytes = proc_status_bytes("VmRSS:");
    out->run_peak_rss_bytes = -1;
    if (mc_bench_work_init(&w, j->shape, j->impl, j->ops, j->dtype, j->batch, j->len, j->threads, BENCH_SEED, out->msg,
                           sizeof out->msg) != 0)
        return;
    if (mc_bench_work_packed_init(w, pj->seqs, out->msg, sizeof out->msg) != 0)
        goto done;
    out->footprint_bytes = (double)mc_bench_work_footprint_bytes(w);
    malloc_trim(0);
    const int hwm = reset_peak_rss() == 0;
    for (int r = -1; r < j->reps; r++) {
        progress("%s: %s %d/%d", j->label, r < 0 ? "warm-up" : "rep", r < 0 ? 1 : r + 1, r < 0 ? 1 : j->reps);
        if (mc_bench_work_reset(w, out->msg, sizeof out->msg) != 0)
            goto done;
        double t0 = now_s();
        if (mc_bench_work_run(w, out->msg, sizeof out->msg) != 0)
            goto done;
        if (r >= 0)
            tb[r] = now_s() - t0;
        if (mc_bench_work_packed_reset(w, out->msg, sizeof out->msg) != 0)
            goto done;
        t0 = now_s();
        if (mc_bench_work_packed_run(w, out->msg, sizeof out->msg) != 0)
            goto done;
        if (r >= 0)
            tp[r] = now_s() - t0;
    }
    median_min(tb, j->reps, &out->median_s, &out->min_s);
    median_min(tp, j->reps, &out->packed_median_s, &mn);
    out->run_peak_rss_bytes = hwm ? proc_status_bytes("VmHWM:") : -1;
    out->ok = 1;
done:
    mc_bench_work_free(w);
}

struct sgemm_job {
    double flops;
    int reps;
};

/* cblas_sgemm of n×n by n×n with 2n³ ≈ flops (n >= 64). */
static void job_sgemm(const void *arg, struct bench_timing *out)
{
    const struct sgemm_job *j = arg;
    int64_t n = (int64_t)llround(cbrt(j->flops / 2.0));
    if (n < 64)
        n = 64;
    if (n > 16384)
        n = 16384;
    out->sgemm_n = n;
    float *a = malloc((size_t)(n * n) * sizeof *a), *b = malloc((size_t)(n * n) * sizeof *b);
    float *c = malloc((size_t)(n * n) * sizeof *c);
    double t[BENCH_MAX_REPS];
    if (!a || !b || !c) {
        snprintf(out->msg, sizeof out->msg, "out of memory for the %lld x %lld sgemm", (long long)n, (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n * n; i++) {
        a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        b[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
        c[i] = 0.0f;
    }
    for (int r = -1; r < j->reps; r++) {
        progress("sgemm %lld^3: %s %d/%d", (long long)n, r < 0 ? "warm-up" : "rep", r < 0 ? 1 : r + 1,
                 r < 0 ? 1 : j->reps);
        const double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)n, (blasint)n, 1.0f, a, (blasint)n,
                    b, (blasint)n, 0.0f, c, (blasint)n);
        if (r >= 0)
            t[r] = now_s() - t0;
    }
    median_min(t, j->reps, &out->median_s, &out->min_s);
    out->ok = 1;
done:
    free(a);
    free(b);
    free(c);
}

/* Runs fn in a forked child with `blas_threads` OpenBLAS threads; the child's result comes back through a
 * pipe, its peak RSS through wait4. 0, or -1 with out->msg saying what went wrong. */
static int run_in_child(void (*fn)(const void *, struct bench_timing *), const void *arg, int blas_threads,
                        struct bench_timing *out, long long *peak_rss_bytes)
{
    memset(out, 0, sizeof *out);
    *peak_rss_bytes = 0;
    int fd[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fd) != 0) {
        snprintf(out->msg, sizeof out->msg, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(out->msg, sizeof out->msg, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        openblas_set_num_threads(blas_threads);
        struct bench_timing res;
        memset(&res, 0, sizeof res);
        fn(arg, &res);
        const char *p = (const char *)&res;
        size_t left = sizeof res;
        while (left > 0) {
            ssize_t k = write(fd[1], p, left);
            if (k <= 0)
                _exit(3);
            p += k;
            left -= (size_t)k;
        }
        fflush(stdout);
        _exit(0);
    }
    close(fd[1]);
    struct bench_timing res;
    size_t got = 0;
    while (got < sizeof res) {
        ssize_t k = read(fd[0], (char *)&res + got, sizeof res - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    progress_clear();
    *peak_rss_bytes = (long long)ru.ru_maxrss * 1024; /* Linux: kilobytes */
    if (got != sizeof res) {
        if (WIFSIGNALED(status))
            snprintf(out->msg, sizeof out->msg, "the timing child died of signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(out->msg, sizeof out->msg, "the timing child exited with status %d before reporting",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return -1;
    }
    *out = res;
    return out->ok ? 0 : -1;
}

/* ---- report -------------------------------------------------------------------------------------- */

static void cpu_model_name(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ' || *p == '\t')
                    p++;
                snprintf(buf, len, "%s", p);
                buf[strcspn(buf, "\n")] = 0;
            }
            break;
        }
    }
    fclose(f);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

/* What the timed runs held above the idle process, over the footprint; NAN when not measured. */
static double run_over_footprint(const struct bench_record *r)
{
    if (r->run_peak_rss_bytes < 0 || r->baseline_rss_bytes < 0 || !(r->footprint_bytes > 0))
        return NAN;
    return (double)(r->run_peak_rss_bytes - r->baseline_rss_bytes) / r->footprint_bytes;
}

static int write_json(const char *path, const struct bench_opts *o, const struct bench_record *recs, int n,
                      const char *cpu, const char *blas)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "mixcheck bench: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "{\"format\": \"mixcheck-bench\", \"cpu\": ");
    json_string(f, cpu);
    fprintf(f, ", \"openblas\": ");
    json_string(f, blas);
    fprintf(f, ", \"openblas_threads\": %d, \"reps\": %d, \"records\": [", o->threads, o->reps);
    for (int i = 0; i < n; i++) {
        const struct bench_record *r = &recs[i];
        fprintf(f, "%s\n  {\"family\": \"%s\", \"backend\": ", i ? "," : "", mc_family_name(r->family));
        json_string(f, o->backend);
        fprintf(f, ", \"dtype\": \"%s\", \"batch\": %lld, \"len\": %lld, \"threads\": %d, \"mode\": \"%s\", \"shape\": ",
                mc_dtype_name(o->dtype), (long long)o->batch, (long long)o->len, o->threads,
                o->core ? "core" : o->packed ? "packed" : "layer");
        json_string(f, r->shape);
        fprintf(f, ", \"tokens_per_s\": ");
        json_number(f, r->tokens_per_s);
        fprintf(f, ", \"gflop_per_s\": ");
        json_number(f, r->gflop_per_s);
        fprintf(f, ", \"peak_fraction\": ");
        json_number(f, r->peak_fraction);
        fprintf(f, ", \"speedup_vs_reference\": ");
        json_number(f, r->speedup);
        fprintf(f, ", \"peak_rss_bytes\": %lld, \"median_s\": ", r->peak_rss_bytes);
        json_number(f, r->median_s);
        fprintf(f, ", \"flop_per_token\": ");
        json_number(f, r->flop_tok);
        fprintf(f, ", \"flop_per_token_executed\": ");
        json_number(f, r->flop_tok_exec);
        fprintf(f, ", \"sgemm_gflop_per_s\": ");
        json_number(f, r->sgemm_gflop_per_s);
        fprintf(f, ", \"sgemm_n\": %lld, \"reference\": \"%s\", \"reference_len\": %lld, \"reference_tokens_per_s\": ",
                (long long)r->sgemm_n, o->core ? "plain-f64-recurrence" : "reference", (long long)r->ref_len);
        json_number(f, r->ref_tokens_per_s);
        fprintf(f, ", \"footprint_bytes\": ");
        json_number(f, r->footprint_bytes);
        fprintf(f, ", \"rss_over_footprint\": ");
        json_number(f, r->footprint_bytes > 0 ? (double)r->peak_rss_bytes / r->footprint_bytes : NAN);
        fprintf(f, ", \"baseline_rss_bytes\": %lld, \"run_peak_rss_bytes\": %lld, \"run_rss_over_footprint\": ",
                r->baseline_rss_bytes, r->run_peak_rss_bytes);
        json_number(f, run_over_footprint(r));
        if (o->packed) {
            fprintf(f, ", \"packed_seqs\": %lld, \"packed_min_len\": %lld, \"packed_max_len\": %lld, "
                       "\"packed_tokens_per_s\": ",
                    (long long)o->seqs, (long long)r->packed_min_len, (long long)r->packed_max_len);
            json_number(f, r->packed_tokens_per_s);
            fprintf(f, ", \"packed_over_batched\": ");
            json_number(f, r->packed_ratio);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "mixcheck bench: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

/* --packed: tokens/s of the batched forward and of the packed call at the same tokens, and their ratio. */
static void print_packed_header(void)
{
    printf("%-9s %-10s %-4s %9s %5s %11s %3s %12s %12s %8s %9s\n", "family", "backend", "type", "batched", "seqs",
           "lengths", "thr", "batched t/s", "packed t/s", "packed/b", "peak RSS");
}

static void print_packed_record(const struct bench_opts *o, const struct bench_record *r)
{
    char bl[32], lens[32];
    snprintf(bl, sizeof bl, "%lldx%lld", (long long)o->batch, (long long)o->len);
    snprintf(lens, sizeof lens, "%lld..%lld", (long long)r->packed_min_len, (long long)r->packed_max_len);
    printf("%-9s %-10s %-4s %9s %5lld %11s %3d %12.0f %12.0f %7.3fx %7.0fMB\n", mc_family_name(r->family), o->backend,
           mc_dtype_name(o->dtype), bl, (long long)o->seqs, lens, o->threads, r->tokens_per_s, r->packed_tokens_per_s,
           r->packed_ratio, (double)r->peak_rss_bytes / 1e6);
}

static void print_header(void)
{
    printf("%-9s %-5s %-10s %-4s %3s %6s %3s %11s %8s %8s %6s %8s %9s %6s %6s\n", "family", "mode", "backend", "type",
           "B", "L", "thr", "tokens/s", "GFLOP/s", "sgemm", "peak", "vs ref", "peak RSS", "RSS/in", "run/in");
}

static void print_record(const struct bench_opts *o, const struct bench_record *r)
{
    char ref[32];
    if (isfinite(r->speedup))
        snprintf(ref, sizeof ref, "%.1fx", r->speedup);
    else
        snprintf(ref, sizeof ref, "-");
    printf("%-9s %-5s %-10s %-4s %3lld %6lld %3d %11.0f %8.1f %8.1f %5.1f%% %8s %7.0fMB %5.2fx %5.2fx\n",
           mc_family_name(r->family), o->core ? "core" : "layer", o->backend, mc_dtype_name(o->dtype),
           (long long)o->batch, (long long)o->len, o->threads, r->tokens_per_s, r->gflop_per_s, r->sgemm_gflop_per_s,
           100.0 * r->peak_fraction, ref, (double)r->peak_rss_bytes / 1e6,
           r->footprint_bytes > 0 ? (double)r->peak_rss_bytes / r->footprint_bytes : NAN, run_over_footprint(r));
}

/* ---- one configuration ----------------------------------------------------------------------------- */

/* 0 measured, else the exit code of what went wrong (printed). */
static int bench_family(const struct mc_registry *reg, const struct bench_opts *o, enum mc_family family,
                        struct bench_record *rec)
{
    const char *fam = mc_family_name(family);
    const struct mc_backend_ops *ops = mc_registry_find(reg, o->backend, family);
    const struct mc_backend_ops *ref_ops = mc_registry_find(reg, "reference", family);
    if (!ops) {
        fprintf(stderr, "mixcheck bench: backend '%s' has no %s implementation: nothing to time\n", o->backend, fam);
        return 125;
    }
    if (!(ops->dtypes & MC_DTYPE_BIT(o->dtype))) {
        fprintf(stderr, "mixcheck bench: backend '%s' (%s) does not declare dtype %s: nothing to time\n", o->backend,
                fam, mc_dtype_name(o->dtype));
        return 125;
    }
    struct mc_bench_shape shape;
    bench_shape_for(o, family, &shape);
    memset(rec, 0, sizeof *rec);
    rec->family = family;
    rec->speedup = rec->ref_tokens_per_s = NAN;
    const enum mc_bench_mode mode = o->core ? MC_BENCH_CORE : MC_BENCH_LAYER;
    mc_bench_shape_describe(&shape, mode, rec->shape, sizeof rec->shape);
    rec->flop_tok = mc_bench_flop_per_token(&shape, mode);
    rec->flop_tok_exec = mc_bench_flop_per_token_chunked(&shape, mode);

    /* 1. the gate */
    int code = bench_gate(reg, o, family, o->backend);
    if (code != 0)
        return code;
    if (o->core) {
        char msg[512];
        progress("gate: %s cpu core vs the plain recurrence ...", fam);
        if (mc_bench_core_validate(family, o->threads, msg, sizeof msg) != 0) {
            progress_clear();
            fprintf(stderr, "mixcheck bench: refusing to time the %s cpu core: %s\n", fam, msg);
            return 1;
        }
        progress_clear();
        printf("gate: %-9s cpu core   f32  matches the plain f64 recurrence (B 2, L 53 in calls of 21, 1 and 31, chunk-crossing)\n",
               fam);
    }
    if (o->packed) {
        if (!(ops->caps & MC_CAP_PACKED) || !ops->forward_packed) {
            fprintf(stderr, "mixcheck bench: backend '%s' (%s) does not implement forward_packed: nothing to time\n",
                    o->backend, fam);
            return 125;
        }
        char plabel[128];
        snprintf(plabel, sizeof plabel, "%s %s batched [%lld][%lld] / packed %lld seqs", fam, o->backend,
                 (long long)o->batch, (long long)o->len, (long long)o->seqs);
        const struct packed_job pj = {
            .work = {.label = plabel, .shape = &shape, .impl = MC_BENCH_IMPL_BACKEND, .ops = ops, .dtype = o->dtype,
                     .batch = o->batch, .len = o->len, .threads = o->threads, .reps = o->reps},
            .seqs = o->seqs};
        struct bench_timing pt;
        if (run_in_child(job_packed, &pj, 1, &pt, &rec->peak_rss_bytes) != 0) {
            fprintf(stderr, "mixcheck bench: %s: %s\n", plabel, pt.msg);
            return 1;
        }
        const double tokens = (double)(o->batch * o->len);
        rec->median_s = pt.median_s;
        rec->tokens_per_s = tokens / pt.median_s;
        rec->gflop_per_s = rec->flop_tok * tokens / pt.median_s * 1e-9;
        rec->packed_tokens_per_s = tokens / pt.packed_median_s;
        rec->packed_ratio = rec->packed_tokens_per_s / rec->tokens_per_s;
        rec->footprint_bytes = pt.footprint_bytes;
        rec->baseline_rss_bytes = pt.baseline_rss_bytes;
        rec->run_peak_rss_bytes = pt.run_peak_rss_bytes;
        rec->sgemm_gflop_per_s = rec->peak_fraction = NAN;
        int64_t *lens = calloc((size_t)o->seqs, sizeof *lens);
        if (lens) {
            mc_bench_packed_lengths(o->batch * o->len, o->seqs, lens);
            rec->packed_min_len = rec->packed_max_len = lens[0];
            for (int64_t i = 1; i < o->seqs; i++) {
                rec->packed_min_len = lens[i] < rec->packed_min_len ? lens[i] : rec->packed_min_len;
                rec->packed_max_len = lens[i] > rec->packed_max_len ? lens[i] : rec->packed_max_len;
            }
            free(lens);
        }
        return 0;
    }
    int time_ref = 0;
    if (o->core) {
        time_ref = 1;
    } else if (ref_ops && ref_ops != ops && (ref_ops->dtypes & MC_DTYPE_BIT(o->dtype))) {
        const int rc = bench_gate(reg, o, family, "reference");
        if (rc == 1 || rc == 2)
            return rc;
        time_ref = rc == 0;
    } else if (ref_ops == ops) {
        time_ref = 0; /* the reference against itself is 1x */
        rec->speedup = 1.0;
    }

    /* 2. time */
    char label[128];
    snprintf(label, sizeof label, "%s %s %s L=%lld", fam, o->backend, o->core ? "core" : "layer", (long long)o->len);
    const struct work_job job = {.label = label, .shape = &shape, .impl = o->core ? MC_BENCH_IMPL_CORE
                                                                                  : MC_BENCH_IMPL_BACKEND,
                                 .ops = ops, .dtype = o->dtype, .batch = o->batch, .len = o->len,
                                 .threads = o->threads, .reps = o->reps};
    struct bench_timing t;
    if (run_in_child(job_work, &job, 1, &t, &rec->peak_rss_bytes) != 0) {
        fprintf(stderr, "mixcheck bench: %s: %s\n", label, t.msg);
        return 1;
    }
    const double tokens = (double)(o->batch * o->len);
    rec->median_s = t.median_s;
    rec->tokens_per_s = tokens / t.median_s;
    rec->gflop_per_s = rec->flop_tok * tokens / t.median_s * 1e-9;
    rec->footprint_bytes = t.footprint_bytes;
    rec->baseline_rss_bytes = t.baseline_rss_bytes;
    rec->run_peak_rss_bytes = t.run_peak_rss_bytes;

    const struct sgemm_job sj = {.flops = rec->flop_tok * tokens, .reps = o->reps};
    long long rss = 0;
    if (run_in_child(job_sgemm, &sj, o->threads, &t, &rss) != 0) {
        fprintf(stderr, "mixcheck bench: sgemm baseline: %s\n", t.msg);
        return 1;
    }
    rec->sgemm_n = t.sgemm_n;
    rec->sgemm_peak_rss_bytes = rss;
    rec->sgemm_gflop_per_s = 2.0 * (double)t.sgemm_n * (double)t.sgemm_n * (double)t.sgemm_n / t.median_s * 1e-9;
    rec->peak_fraction = rec->gflop_per_s / rec->sgemm_gflop_per_s;

    rec->ref_len = o->ref_len;
    if (time_ref) {
        char rlabel[128];
        snprintf(rlabel, sizeof rlabel, "%s %s L=%lld", fam, o->core ? "plain recurrence" : "reference",
                 (long long)o->ref_len);
        struct work_job rj = job;
        rj.label = rlabel;
        rj.impl = o->core ? MC_BENCH_IMPL_PLAIN : MC_BENCH_IMPL_BACKEND;
        rj.ops = ref_ops;
        rj.len = o->ref_len;
        if (run_in_child(job_work, &rj, 1, &t, &rec->ref_peak_rss_bytes) != 0) {
            fprintf(stderr, "mixcheck bench: %s: %s\n", rlabel, t.msg);
            return 1;
        }
        rec->ref_tokens_per_s = (double)(o->batch * o->ref_len) / t.median_s;
        rec->speedup = rec->tokens_per_s / rec->ref_tokens_per_s;
    }
    return 0;
}

int mc_cli_bench(int argc, char **argv, mc_bench_register_fn register_builtins)
{
    if (mc_bench_python_wanted(argc, argv))
        return mc_bench_python(argc, argv);
    struct bench_opts o;
    int code = parse_args(argc, argv, &o);
    if (code != 0)
        return code < 0 ? 0 : code;
    progress_on = isatty(fileno(stdout));
    struct mc_registry reg;
    mc_registry_init(&reg);
    struct mc_plugins plugins;
    mc_plugins_init(&plugins);
    struct mc_error err = {0};
    struct bench_record recs[BENCH_MAX_FAMILIES]; /* one per family timed */
    int n_recs = 0;
    if (register_builtins(&reg, &err) != 0)
        goto done;
    for (int i = 0; i < o.n_plugins && err.code == MC_ERR_NONE; i++)
        mc_plugins_load(&plugins, o.plugins[i], &reg, &err);
    if (err.code != MC_ERR_NONE)
        goto done;
    if (!mc_registry_has_name(&reg, o.backend)) {
        mc_error_set(&err, MC_ERR_USAGE, "--backend: no backend named '%s' is registered (see mixcheck list)",
                     o.backend);
        goto done;
    }
    openblas_set_num_threads(1);
    char cpu[256];
    cpu_model_name(cpu, sizeof cpu);
    char blas[512];
    mc_blas_core_describe(blas, sizeof blas);
    printf("mixcheck bench: %s, %ld online CPU(s); %d rep(s) after a warm-up, median\n%s\n"
           "threads: %d backend thread(s) (mc_model_desc.threads) calling single-threaded OpenBLAS "
           "(openblas_set_num_threads(1)); the sgemm baseline: OpenBLAS with %d thread(s) "
           "(openblas_set_num_threads(%d))\n",
           cpu, sysconf(_SC_NPROCESSORS_ONLN), o.reps, blas, o.threads, o.threads, o.threads);
    int any = 0, worst = 0;
    for (int i = 0; i < o.n_families; i++) {
        const enum mc_family f = o.families[i];
        if (!o.explicit_family && !mc_registry_find(&reg, o.backend, f))
            continue; /* all families by default: those the backend implements */
        any = 1;
        const int rc = bench_family(&reg, &o, f, &recs[n_recs]);
        if (rc == 0)
            n_recs++;
        /* worst: 2 before 1 before 125 */
        const int rank_rc = rc == 2 ? 3 : rc == 1 ? 2 : rc == 125 ? 1 : 0;
        const int rank_w = worst == 2 ? 3 : worst == 1 ? 2 : worst == 125 ? 1 : 0;
        if (rank_rc > rank_w)
            worst = rc;
    }
    if (!any) {
        fprintf(stderr, "mixcheck bench: backend '%s' implements none of the selected families: nothing to time\n",
                o.backend);
        worst = 125;
    }
    if (n_recs > 0 && o.packed) {
        printf("\n");
        print_packed_header();
        for (int i = 0; i < n_recs; i++)
            print_packed_record(&o, &recs[i]);
        printf("\n");
        for (int i = 0; i < n_recs; i++)
            printf("%-9s %s\n", mc_family_name(recs[i].family), recs[i].shape);
        printf("batched = one forward over [B][L], every token real; packed = one forward_packed over the same B*L "
               "tokens as %lld sequences of mixed lengths on sparse slots of a pool of %lld rows, every other one "
               "continuing from its slot; the two alternate rep by rep in one process; packed/b = packed tokens/s / "
               "batched tokens/s\n",
               (long long)o.seqs, (long long)(2 * o.seqs));
    } else if (n_recs > 0) {
        printf("\n");
        print_header();
        for (int i = 0; i < n_recs; i++)
            print_record(&o, &recs[i]);
        printf("\n");
        for (int i = 0; i < n_recs; i++)
            printf("%-9s %s; %.4g FLOP/token = %s (sequential count; the chunked cpu algorithm executes %.4g); "
                   "sgemm %lld^3; %s at L=%lld: %.0f tokens/s\n",
                   mc_family_name(recs[i].family), recs[i].shape, recs[i].flop_tok,
                   mc_bench_flop_formula(recs[i].family, o.core ? MC_BENCH_CORE : MC_BENCH_LAYER),
                   recs[i].flop_tok_exec, (long long)recs[i].sgemm_n,
                   o.core ? "plain f64 recurrence" : "reference", (long long)recs[i].ref_len,
                   recs[i].ref_tokens_per_s);
        printf("peak = GFLOP/s / sgemm GFLOP/s (same FLOPs, same threads, this run); in = bytes of inputs, weights, "
               "outputs and cache; RSS/in = the timing process's whole peak RSS (libraries and setup included) / in; "
               "run/in = (peak RSS over the timed runs - RSS of the process before setup) / in\n");
    }
    if (o.json_path && n_recs > 0 && write_json(o.json_path, &o, recs, n_recs, cpu, blas) != 0 && worst == 0)
        worst = 2;
    code = worst;
done:
    if (err.code != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck bench: %s\n", err.msg);
        code = mc_error_exit_code(err.code);
    }
    mc_plugins_unload(&plugins);
    mc_registry_free(&reg);
    return code;
}
