/* bench_python.c — see bench_python.h.
 *
 * Both backends get the same shortconv model description (D channels, f32) and forward calls of
 * [1][L][D] for L over a range of sizes; each size is timed over enough calls to last ~0.2 s (median
 * of per-call times). The difference at one token is the adapter's fixed cost per call; the slope
 * between the two largest sizes its rate in bytes of x per second. The C baseline's one memcpy is
 * the floor. The Python backend's x and y are placed in its host memory (host_map, as the harness
 * places them for a check): the worker reads x and writes y there, one pass over the bytes (the
 * worker's copy of the result into y's view), so its rate is expected near the baseline's; with
 * --copy-through-arena they are the bench's own memory, as for a backend without host memory: x into
 * the arena, into y's view, out of it, three passes. The report also counts the interpreter starts
 * (one per run: the zygote) and the workers it forked.
 */
#define _DEFAULT_SOURCE
#include "bench_python.h"
#include "bench.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "exec/pybackend.h"
#include "exec/registry.h"

/* ---- the C baseline: y = x ------------------------------------------------------------------- */

struct copy_model {
    int64_t D;
};

static enum mc_backend_status c_create(const struct mc_model_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    struct copy_model *cm = malloc(sizeof *cm);
    if (cm == NULL) {
        snprintf(msg->text, sizeof msg->text, "out of memory");
        return MC_BACKEND_NOMEM;
    }
    cm->D = ((const struct mc_shortconv_config *)d->config)->hidden_size;
    *m = (struct mc_model *)cm;
    return MC_BACKEND_OK;
}

static void c_destroy(struct mc_model *m)
{
    free(m);
}

static enum mc_backend_status c_forward(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                        struct mc_msg *msg)
{
    (void)c, (void)msg;
    const struct copy_model *cm = (const struct copy_model *)m;
    memcpy(a->y, a->x, (size_t)(a->batch * a->len * cm->D) * sizeof(float));
    return MC_BACKEND_OK;
}

static const struct mc_backend_ops c_copy = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "c-copy",
    .device = "cpu",
    .family = MC_FAMILY_SHORTCONV,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32),
    .model_create = c_create,
    .model_destroy = c_destroy,
    .forward = c_forward,
};

/* ---- timing ------------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds per forward of [1][L][D]; -1 after a failed call or a wrong output. */
static double time_forward(const struct mc_backend_ops *ops, struct mc_model *m, int64_t L, int64_t D, float *x,
                           float *y, char *why, size_t why_len)
{
    struct mc_forward_args a = {.batch = 1, .len = L, .x = x, .y = y};
    struct mc_msg msg = {{0}};
    size_t n = (size_t)(L * D);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i % 1000) * 0.5f + (float)L;
    memset(y, 0xff, n * sizeof *y);
    if (ops->forward(m, NULL, &a, &msg) != MC_BACKEND_OK || memcmp(x, y, n * sizeof *x) != 0) {
        snprintf(why, why_len, "%s: %s", ops->name, msg.text[0] ? msg.text : "y differs from x");
        return -1;
    }
    enum { MAX_CALLS = 20000 };
    static double t[MAX_CALLS];
    int calls = 0;
    double start = mc_clock_now_s();
    while (calls < MAX_CALLS && (calls < 7 || mc_clock_now_s() - start < 0.2)) {
        double t0 = mc_clock_now_s();
        if (ops->forward(m, NULL, &a, &msg) != MC_BACKEND_OK) {
            snprintf(why, why_len, "%s: %s", ops->name, msg.text);
            return -1;
        }
        t[calls++] = mc_clock_now_s() - t0;
    }
    qsort(t, (size_t)calls, sizeof t[0], cmp_double);
    return t[calls / 2];
}

/* Seconds per byte between the two largest sizes (the slope, free of the fixed cost). */
static double slope(const double *bytes, const double *t, int n)
{
    return (t[n - 1] - t[n - 2]) / (bytes[n - 1] - bytes[n - 2]);
}

int mc_bench_python_wanted(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--python-overhead") == 0)
            return 1;
    return 0;
}

int mc_bench_python(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"python-overhead", no_argument, NULL, 'o'},
        {"python", required_argument, NULL, 'p'},
        {"hidden", required_argument, NULL, 'd'},
        {"copy-through-arena", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct mc_python_options po = {.python = "python3", .device = "cpu"};
    int64_t D = 1024;
    int c, through_arena = 0;
    opterr = 0;
    optind = 2;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'p')
            po.python = optarg;
        else if (c == 'a')
            through_arena = 1;
        else if (c == 'd' && mc_bench_parse_i64(optarg, 1, 65536, &D) == 0)
            continue;
        else if (c == 'h') {
            printf("usage: mixcheck bench --python-overhead [--python PY] [--hidden D] [--copy-through-arena]\n"
                   "the Python backend adapter's own cost: a Python backend that copies x to y against a C\n"
                   "backend doing the same, forward calls of [1][L][D] f32 (D 1024 by default), one process;\n"
                   "the Python backend's x and y in its shared memory (host_map) as a check places them, or\n"
                   "with --copy-through-arena in the bench's own (copied through the arena, 3 passes)\n");
            return 0;
        } else if (c != 'o') {
            fprintf(stderr, "mixcheck: bench --python-overhead: unknown or incomplete option '%s'\n", argv[optind - 1]);
            return 2;
        }
    }
    static struct mc_registry reg;
    mc_registry_init(&reg);
    struct mc_error err = {0};
    const char *spec = "mixcheck_backend.bench";
    double t0 = mc_clock_now_s();
    if (mc_python_load(&po, &spec, 1, &reg, 1, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: %s\n", err.msg);
        return mc_error_exit_code(err.code);
    }
    double t_start = mc_clock_now_s() - t0;
    const struct mc_backend_ops *py = mc_registry_find(&reg, "py-copy", MC_FAMILY_SHORTCONV);
    struct mc_shortconv_config cfg = {.hidden_size = D, .conv_kernel = 4, .conv_bias = 0};
    struct mc_model_desc desc = {.family = MC_FAMILY_SHORTCONV, .dtype = MC_DTYPE_F32, .config = &cfg};
    static const int64_t lens[] = {1, 4, 16, 64, 256, 1024, 4096};
    enum { NL = sizeof lens / sizeof lens[0] };
    size_t max = (size_t)lens[NL - 1] * (size_t)D;
    float *x = malloc(max * sizeof *x), *y = malloc(max * sizeof *y), *px = NULL, *py_ = NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pbytes = (max * sizeof *x + page - 1) / page * page;
    int shared = !through_arena && py != NULL && py->host_map != NULL && py->host_unmap != NULL;
    if (shared) { /* the Python backend's x and y where a check would place them */
        px = py->host_map(pbytes);
        py_ = py->host_map(pbytes);
        shared = px != NULL && py_ != NULL;
    }
    struct mc_model *mp = NULL, *mc = NULL;
    struct mc_msg msg = {{0}};
    int code = 0;
    t0 = mc_clock_now_s();
    if (x == NULL || y == NULL || py == NULL || py->model_create(&desc, &mp, &msg) != MC_BACKEND_OK ||
        c_copy.model_create(&desc, &mc, &msg) != MC_BACKEND_OK) {
        fprintf(stderr, "mixcheck: bench --python-overhead: %s\n", msg.text[0] ? msg.text : "out of memory");
        code = 1;
        goto done;
    }
    double t_worker = mc_clock_now_s() - t0;
    printf("mixcheck bench --python-overhead: %s, forward [1][L][%lld] f32, y = x; median of >= 0.2 s per size\n"
           "interpreter start (the zygote, once per run): %.3f s; first model (a forked worker): %.1f ms\n"
           "python x and y: %s\n\n"
           "%6s %12s %12s %12s %12s %8s\n",
           po.python, (long long)D, t_start, t_worker * 1e3,
           shared ? "in its shared memory (host_map), 1 pass over x" : "the bench's own, 3 passes over x through the arena",
           "L", "x bytes", "C us/call", "py us/call", "py - C us", "py/C");
    double bytes[NL], tc[NL], tp[NL];
    char why[MC_MSG_LEN + 64];
    for (int i = 0; i < NL; i++) {
        bytes[i] = (double)lens[i] * D * sizeof(float);
        tc[i] = time_forward(&c_copy, mc, lens[i], D, x, y, why, sizeof why);
        tp[i] = tc[i] < 0 ? -1 : time_forward(py, mp, lens[i], D, shared ? px : x, shared ? py_ : y, why, sizeof why);
        if (tc[i] < 0 || tp[i] < 0) {
            fprintf(stderr, "mixcheck: bench --python-overhead: %s\n", why);
            code = 1;
            goto done;
        }
        printf("%6lld %12.0f %12.2f %12.2f %12.2f %8.2f\n", (long long)lens[i], bytes[i], tc[i] * 1e6, tp[i] * 1e6,
               (tp[i] - tc[i]) * 1e6, tp[i] / tc[i]);
    }
    double bc = slope(bytes, tc, NL), bp = slope(bytes, tp, NL);
    printf("\nadapter per call beyond the bytes (L = 1): %.1f us\n"
           "bytes of x per second (slope between the two largest sizes): C %.2f GB/s, python %.2f GB/s (%.2f of\n"
           "the C copy's rate; %s)\n"
           "interpreter starts: 1 for the run (the zygote); one worker forked per process that creates a model\n",
           (tp[0] - tc[0]) * 1e6, 1e-9 / bc, 1e-9 / bp, bc / bp,
           shared ? "x and y in shared memory: 1 pass, the worker's copy into y's view"
                  : "3 passes over x: into the arena, into y's view, out of it");
done:
    if (mp != NULL)
        py->model_destroy(mp);
    if (mc != NULL)
        c_copy.model_destroy(mc);
    free(x);
    free(y);
    if (px != NULL)
        py->host_unmap(px, pbytes);
    if (py_ != NULL)
        py->host_unmap(py_, pbytes);
    mc_python_unload();
    return code;
}
