/*
 * test_python_pool.c — the Python adapter's host memory (host_map / host_unmap of struct
 * mc_backend_ops, harness/src/exec/pybackend.c) and the guards placed in it (guard.c
 * mc_guard_alloc_in / mc_guard_alloc_input_in): blocks are page-aligned, disjoint, reused and merged when
 * freed, sizes that are not whole pages are refused; a forward reads x and writes y there, from the pool,
 * from the caller's own memory and from a mix of both, y == x every time; the guards in pool pages record
 * writes before and after a buffer, the fences fault and are named by mc_guard_describe_fault; a forked
 * process gets a pool of its own (the parent's is not inherited) and a worker of its own. Drives the
 * bench's copy backend (python/mixcheck_backend/bench.py: y = x). Needs /usr/bin/python3 with numpy;
 * skipped (77) without.
 */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/guard.h"
#include "exec/pybackend.h"
#include "exec/registry.h"

static struct mc_registry reg;
static const struct mc_backend_ops *py;
static size_t page;

static int setup(void **state)
{
    (void)state;
    static struct mc_python_options po = {.python = "/usr/bin/python3", .device = "cpu"};
    static const char *spec = "mixcheck_backend.bench";
    struct mc_error err = {0};
    mc_registry_init(&reg);
    if (mc_python_load(&po, &spec, 1, &reg, 1, &err) != MC_ERR_NONE) {
        fprintf(stderr, "test_python_pool: %s\n", err.msg);
        return -1;
    }
    py = mc_registry_find(&reg, "py-copy", MC_FAMILY_SHORTCONV);
    page = (size_t)sysconf(_SC_PAGESIZE);
    return py == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    mc_python_unload();
    return 0;
}

static void test_blocks_are_aligned_disjoint_reused_and_merged(void **state)
{
    (void)state;
    assert_non_null(py->host_map);
    assert_non_null(py->host_unmap);
    assert_null(py->host_map(0));
    assert_null(py->host_map(page + 1)); /* whole pages only */
    assert_null(py->host_map((size_t)1 << 40)); /* past the reserved range */
    unsigned char *a = py->host_map(page), *b = py->host_map(3 * page), *c = py->host_map(2 * page);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal((uintptr_t)a % page, 0);
    assert_int_equal((uintptr_t)b % page, 0);
    assert_int_equal((uintptr_t)c % page, 0);
    memset(a, 1, page);
    memset(b, 2, 3 * page);
    memset(c, 3, 2 * page);
    for (size_t i = 0; i < page; i++)
        assert_int_equal(a[i], 1);
    for (size_t i = 0; i < 3 * page; i++)
        assert_int_equal(b[i], 2);
    /* a freed block is handed out again for the same size; two freed neighbours merge into one */
    py->host_unmap(b, 3 * page);
    unsigned char *b2 = py->host_map(3 * page);
    assert_ptr_equal(b2, b);
    py->host_unmap(a, page);
    py->host_unmap(b2, 3 * page);
    unsigned char *ab = py->host_map(4 * page);
    assert_ptr_equal(ab, a);
    /* a smaller request splits a free block: the rest stays free for the next */
    py->host_unmap(ab, 4 * page);
    unsigned char *s1 = py->host_map(page), *s2 = py->host_map(page);
    assert_ptr_equal(s1, a);
    assert_ptr_equal(s2, a + page);
    /* a pointer or size that is not one of its blocks is ignored, the block stays taken */
    py->host_unmap(s1 + page / 2, page);
    py->host_unmap(s1, 2 * page);
    unsigned char *t = py->host_map(page);
    assert_ptr_equal(t, a + 2 * page);
    py->host_unmap(t, page);
    py->host_unmap(s1, page);
    py->host_unmap(s2, page);
    py->host_unmap(c, 2 * page);
}

/* One forward of [1][L][D] (D 16) through the Python copy backend from x into y: 0 when y == x. */
static int forward_copy(struct mc_model *m, const float *x, float *y, int64_t L)
{
    struct mc_forward_args a = {.batch = 1, .len = L, .x = x, .y = y};
    struct mc_msg msg = {{0}};
    memset(y, 0xff, (size_t)L * 16 * sizeof *y);
    if (py->forward(m, NULL, &a, &msg) != MC_BACKEND_OK) {
        fprintf(stderr, "forward: %s\n", msg.text);
        return -1;
    }
    return memcmp(x, y, (size_t)L * 16 * sizeof *x) == 0 ? 0 : -1;
}

static struct mc_model *copy_model(void)
{
    static struct mc_shortconv_config cfg = {.hidden_size = 16, .conv_kernel = 4, .conv_bias = 0};
    struct mc_model_desc desc = {.family = MC_FAMILY_SHORTCONV, .dtype = MC_DTYPE_F32, .config = &cfg};
    struct mc_model *m = NULL;
    struct mc_msg msg = {{0}};
    if (py->model_create(&desc, &m, &msg) != MC_BACKEND_OK)
        fprintf(stderr, "model_create: %s\n", msg.text);
    return m;
}

static void test_forward_from_the_pool_from_own_memory_and_mixed(void **state)
{
    (void)state;
    struct mc_model *m = copy_model();
    assert_non_null(m);
    const int64_t L = 300; /* 19200 bytes: past a page, not a whole number of them */
    size_t bytes = (size_t)L * 16 * sizeof(float), mapped = (bytes + page - 1) / page * page;
    float *px = py->host_map(mapped), *py_ = py->host_map(mapped);
    float *ox = malloc(bytes), *oy = malloc(bytes);
    assert_non_null(px);
    assert_non_null(py_);
    assert_non_null(ox);
    assert_non_null(oy);
    for (int64_t i = 0; i < L * 16; i++)
        px[i] = ox[i] = (float)i * 0.25f - 7.0f;
    assert_int_equal(forward_copy(m, px, py_, L), 0); /* both in the pool: no copy in or out */
    assert_int_equal(forward_copy(m, ox, oy, L), 0);  /* both the caller's: through the arena */
    assert_int_equal(forward_copy(m, px, oy, L), 0);  /* x in the pool, y the caller's */
    assert_int_equal(forward_copy(m, ox, py_, L), 0); /* and the other way round */
    py->host_unmap(px, mapped);
    py->host_unmap(py_, mapped);
    free(ox);
    free(oy);
    py->model_destroy(m);
}

static sigjmp_buf fault_jump;

static void on_fault(int sig)
{
    (void)sig;
    siglongjmp(fault_jump, 1);
}

/* 1 when reading *p faults (SIGSEGV), else 0. */
static int faults(const void *p)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
    int hit = 0;
    if (sigsetjmp(fault_jump, 1) == 0) {
        volatile unsigned char v = *(const volatile unsigned char *)p;
        (void)v;
    } else {
        hit = 1;
    }
    sigaction(SIGSEGV, &old, NULL);
    return hit;
}

static void test_guards_and_fences_in_pool_pages(void **state)
{
    (void)state;
    struct mc_guard_mem mem = {py->host_map, py->host_unmap};
    struct mc_guarded g;
    unsigned char *d = mc_guard_alloc_in(&g, 100, &mem);
    assert_non_null(d);
    assert_non_null(g.unmap); /* in the pool, not the harness's malloc */
    char why[256];
    assert_int_equal(mc_guard_check(&g, "y", why, sizeof why), 0);
    d[100] = 0;
    assert_int_equal(mc_guard_check(&g, "y", why, sizeof why), -1);
    assert_non_null(strstr(why, "out-of-bounds write past the end of 'y'"));
    mc_guard_free(&g);
    d = mc_guard_alloc_in(&g, 100, &mem);
    for (int i = 0; i < 100; i++)
        assert_int_equal(d[i], 0); /* reused pages are zeroed data again, guards refilled */
    assert_int_equal(mc_guard_check(&g, "y", why, sizeof why), 0);
    d[-1] = 0;
    assert_int_equal(mc_guard_check(&g, "y", why, sizeof why), -1);
    assert_non_null(strstr(why, "out-of-bounds write before the start of 'y'"));
    mc_guard_free(&g);

    if (!(mc_guard_mode() & MC_GUARD_FENCE))
        return;
    float *x = mc_guard_alloc_input_in(&g, 64 * sizeof(float), sizeof(float), "x", "forward(test)", &mem);
    assert_non_null(x);
    assert_non_null(g.unmap);
    assert_int_equal((uintptr_t)(x + 64) % page, 0); /* ends flush on the fence */
    assert_int_equal(mc_guard_describe_fault(x + 64, MC_GUARD_ACCESS_READ, why, sizeof why), 1);
    assert_non_null(strstr(why, "read past the end of 'x' (buffer of 256 bytes, at +0 after its end) during "
                                "forward(test)"));
    volatile float v = x[63]; /* the last element reads */
    (void)v;
    assert_int_equal(faults(x + 64), 1); /* the fence after it faults, here in this process */
    assert_int_equal(faults(x - 1), 0);  /* the guard before it is ordinary memory */
    unsigned char *base = g.base;
    size_t total = g.map_bytes;
    mc_guard_free(&g);
    /* the fence pages are read-write again once given back: the same block, whole */
    unsigned char *again = py->host_map(total);
    assert_ptr_equal(again, base);
    memset(again, 0, total);
    assert_int_equal(faults(again + total - 1), 0);
    py->host_unmap(again, total);
}

static void test_a_forked_process_has_its_own_pool_and_worker(void **state)
{
    (void)state;
    unsigned char *mine = py->host_map(page);
    assert_non_null(mine);
    memset(mine, 0x5a, page);
    fflush(NULL);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        /* the parent's block is not mapped here (MADV_DONTFORK; unless this process's new pool took the
         * same addresses); this process's pool and worker are new */
        unsigned char *child = py->host_map(page);
        struct mc_model *m = copy_model();
        float *x = py->host_map(page), *y = py->host_map(page);
        int ok = child != NULL && m != NULL && x != NULL && y != NULL && (child == mine || faults(mine));
        if (ok) {
            for (int i = 0; i < 64; i++)
                x[i] = (float)i;
            memset(child, 0x11, page);
            ok = forward_copy(m, x, y, 4) == 0;
        }
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(p, &st, 0), p);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    for (size_t i = 0; i < page; i++)
        assert_int_equal(mine[i], 0x5a); /* nothing the child wrote reached the parent's pool */
    py->host_unmap(mine, page);
    /* the parent's worker still serves it */
    struct mc_model *m = copy_model();
    assert_non_null(m);
    float *x = py->host_map(page), *y = py->host_map(page);
    for (int i = 0; i < 64; i++)
        x[i] = (float)-i;
    assert_int_equal(forward_copy(m, x, y, 4), 0);
    py->host_unmap(x, page);
    py->host_unmap(y, page);
    py->model_destroy(m);
}

int main(void)
{
    if (system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_python_pool: /usr/bin/python3 with numpy not found: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_are_aligned_disjoint_reused_and_merged),
        cmocka_unit_test(test_forward_from_the_pool_from_own_memory_and_mixed),
        cmocka_unit_test(test_guards_and_fences_in_pool_pages),
        cmocka_unit_test(test_a_forked_process_has_its_own_pool_and_worker),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
