/* pybackend.c — see pybackend.h. The wire format is documented in python/mixcheck_backend/worker.py. */
#define _GNU_SOURCE /* memfd_create */
#include "exec/pybackend.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/dtype.h"
#include "family/family.h"
#include "base/jsonread.h"
#include "exec/provenance.h"
#include "exec/wire.h"
#include "family/stackconfig.h"

/* the package in the build tree (the source tree's python/), and where an installed mixcheck has it
 * relative to the directory of its executable (<prefix>/bin -> <prefix>/share/mixcheck/python) */
#ifndef MC_PYTHON_DIR
#define MC_PYTHON_DIR "python"
#endif
#ifndef MC_PYTHON_RELDIR
#define MC_PYTHON_RELDIR "../share/mixcheck/python"
#endif

enum {
    OP_CREATE = 1,
    OP_DESTROY,
    OP_CACHE_ALLOC,
    OP_CACHE_COPY,
    OP_CACHE_FREE,
    OP_CACHE_EXPORT,
    OP_CACHE_IMPORT,
    OP_FORWARD,
    OP_FORWARD_PACKED,
    OP_STACK_CREATE,
    OP_STACK_FORWARD,
    OP_STACK_CACHE_EXPORT,
};
/* request fields (18 x int64); F_WHERE has bit k set when field k's offset is into the pool, not the arena */
enum {
    F_OP, F_MODEL, F_CACHE, F_CACHE2, F_BATCH, F_LEN, F_X, F_MASK, F_Y, F_A, F_B, F_C, F_N, F_ARENA, F_PAYLOAD,
    F_POOL, F_WHERE,
};
#define N_FIELDS 18
#define IN_POOL(k) ((int64_t)1 << (k))

#define ARENA_MIN ((size_t)1 << 20)
#define ALIGN 64

/* The interpreter's first lines: the shipped package first on sys.path, then the worker. */
static const char boot[] = "import sys; sys.path.insert(0, sys.argv.pop(1)); "
                           "from mixcheck_backend.worker import main; main()";

struct slot {
    struct mc_backend_ops ops;
    char *name, *spec, *attr;
    const struct mc_python_options *opt;
};
static struct slot slots[MC_PYTHON_MAX_BACKENDS];
static int n_slots;
/* What the report's provenance records of this run's Python backends (mc_python_provenance). */
static struct mc_provenance_python prov;

/* The zygote of the run: the interpreter with every spec imported, forking one worker per client. */
static struct {
    pid_t pid; /* 0: none */
    int ctl;   /* SOCK_SEQPACKET, shared by every process of the run (inherited through fork) */
    int log;
} Z = {.ctl = -1, .log = -1};

/* The worker of this process. */
struct worker {
    pid_t owner; /* the process it serves (a forked child must ask for its own) */
    int active;
    int sock, arena_fd, log_fd, status_fd;
    unsigned char *arena;
    size_t arena_bytes;
    unsigned gen; /* models of an earlier worker are gone */
    int dead;
    int has_pool; /* it was given the pool's memfd (P): offsets into the pool reach it */
};
static struct worker W = {.sock = -1, .arena_fd = -1, .log_fd = -1, .status_fd = -1};

/* The process's host memory (host_map, backend.h): one memfd mapped at the start of an address range
 * reserved for it, grown in place (a pointer handed out never moves), and mapped by every worker of
 * the process too (its fd 6, sized in each request), so that the tensors the harness places there
 * reach Python as numpy views with no copy in or out. Blocks of whole pages, first fit, merged when
 * freed, never returned to the system: a check's forwards reuse the same pages (faulted in once, in
 * both processes). The range is MADV_DONTFORK: a forked child (a check's process) starts without it,
 * and makes its own on first use (owner). */
#define POOL_RESERVE ((size_t)1 << 34) /* 16 GiB of address space; a bigger request is refused (NULL) */
#define POOL_BLOCKS 512
struct pool_block {
    size_t off, bytes;
    int used;
};
static struct {
    pid_t owner; /* 0: none in this process */
    int fd;
    unsigned char *base;
    size_t mapped; /* bytes of the memfd mapped at base (and its size) */
    struct pool_block b[POOL_BLOCKS]; /* by offset, covering [0, mapped) */
    int n;
} P = {.fd = -1};
static int pool_ready(void);

/* This process's id without a system call per request (getpid is one, some 0.4 us here, and a forward
 * asked it four times): read once, and again in each child fork makes. */
static pid_t pid_now;
static void pid_refresh(void)
{
    pid_now = getpid();
}
static pid_t self_pid(void)
{
    if (pid_now == 0) {
        pid_now = getpid();
        pthread_atfork(NULL, NULL, pid_refresh);
    }
    return pid_now;
}

static unsigned generation;

struct py_model {
    int slot;
    unsigned gen;
    int64_t h;
    enum mc_dtype dtype;
    size_t es, ss; /* element bytes: storage, exported state */
    struct mc_family_shape sh;
    /* a whole stack (stack_create): its vocabulary, layer count and every layer's shapes; sh.hidden = D */
    int64_t vocab, n_layers;
    struct mc_family_shape *layers;
};
struct py_cache {
    int64_t h, batch;
};

/* DIR/mixcheck_backend/worker.py exists: DIR holds the package. */
static int holds_package(const char *dir)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/mixcheck_backend/worker.py", dir);
    return n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0;
}

const char *mc_python_package_dir(void)
{
    const char *env = getenv("MIXCHECK_PYTHON_DIR");
    if (env && env[0])
        return env;
    /* installed: next to the executable, wherever the prefix was moved (found once per process) */
    static char installed[4096];
    static int looked;
    if (!looked) {
        looked = 1;
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        char *slash = n > 0 ? memrchr(exe, '/', (size_t)n) : NULL;
        if (slash != NULL) {
            *slash = '\0';
            int w = MC_PYTHON_RELDIR[0] == '/' ? snprintf(installed, sizeof installed, "%s", MC_PYTHON_RELDIR)
                                               : snprintf(installed, sizeof installed, "%s/%s", exe, MC_PYTHON_RELDIR);
            if (w <= 0 || (size_t)w >= sizeof installed || !holds_package(installed))
                installed[0] = '\0';
        }
    }
    return installed[0] ? installed : MC_PYTHON_DIR;
}

static enum mc_backend_status fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum mc_backend_status fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg->text, sizeof msg->text, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- the worker process --------------------------------------------------------------------- */

/* Starts PYTHON -c boot PKGDIR zygote SPEC...: fd 3 a SOCK_SEQPACKET socket, 1/2 the log. */
static int spawn_zygote(const char *python, const char *const *specs, int n, char *why, size_t why_len)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, why_len, "socketpair: %s", strerror(errno));
        return -1;
    }
    int log = memfd_create("mixcheck-python-log", MFD_CLOEXEC);
    if (log < 0) {
        snprintf(why, why_len, "memfd_create: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    const char *argv[MC_PYTHON_MAX_BACKENDS + 8];
    int na = 0;
    argv[na++] = python;
    argv[na++] = "-c";
    argv[na++] = boot;
    argv[na++] = mc_python_package_dir();
    argv[na++] = "zygote";
    for (int i = 0; i < n && i < MC_PYTHON_MAX_BACKENDS; i++)
        argv[na++] = specs[i];
    argv[na] = NULL;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
        snprintf(why, why_len, "fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        close(log);
        return -1;
    }
    if (p == 0) {
        /* dies with mixcheck; its workers die with it */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int s = fcntl(sv[1], F_DUPFD, 10), l = fcntl(log, F_DUPFD, 10);
        int nul = open("/dev/null", O_RDONLY);
        if (s < 0 || l < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(l, 1) < 0 || dup2(l, 2) < 0 || dup2(s, 3) < 0)
            _exit(127);
        for (int fd = 4; fd < 1024; fd++)
            close(fd);
        execvp(python, (char *const *)argv);
        const char *e = strerror(errno);
        if (write(2, "cannot run ", 11) < 0 || write(2, python, strlen(python)) < 0 || write(2, ": ", 2) < 0 ||
            write(2, e, strlen(e)) < 0) {
        }
        _exit(127);
    }
    close(sv[1]);
    Z.pid = p;
    Z.ctl = sv[0];
    Z.log = log;
    return 0;
}

/* The worker's last words on one line: from faulthandler's "Fatal Python error" when there is one,
 * else the log's tail; a frame `File "/dir/x.py", line 12 in f` becomes `x.py:12 in f`. */
static void log_tail(int fd, char *out, size_t len)
{
    out[0] = '\0';
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
    if (size <= 0 || len < 2)
        return;
    char buf[4096];
    off_t from = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    if (n <= 0)
        return;
    buf[n] = '\0';
    const char *p = strstr(buf, "Fatal Python error");
    if (p == NULL)
        p = n > 360 ? buf + n - 360 : buf;
    size_t o = 0;
    int space = 0;
    while (*p && o + 1 < len) {
        if (*p == '\n' || *p == ' ' || *p == '\t' || *p == '\r') {
            space = 1;
            p++;
            continue;
        }
        if (space && o > 0 && o + 2 < len)
            out[o++] = ' ';
        space = 0;
        const char *q;
        if (strncmp(p, "File \"", 6) == 0 && (q = strchr(p + 6, '"')) != NULL && strncmp(q, "\", line ", 8) == 0) {
            const char *base = p + 6;
            for (const char *c = p + 6; c < q; c++)
                if (*c == '/')
                    base = c + 1;
            long line = strtol(q + 8, (char **)&p, 10);
            o += (size_t)snprintf(out + o, len - o, "%.*s:%ld", (int)(q - base), base, line);
            if (o >= len)
                o = len - 1;
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
}

/* How a process ended, from its wait status (st < 0: unknown), and its last output. */
static void describe_end(int st, int log_fd, const char *what, char *out, size_t len)
{
    char tail[400];
    log_tail(log_fd, tail, sizeof tail);
    const char *sep = tail[0] ? "; its output: " : "";
    if (st < 0)
        snprintf(out, len, "closed its socket during %s%s%s", what, sep, tail);
    else if (WIFSIGNALED(st))
        snprintf(out, len, "died of signal %d (%s) during %s%s%s", WTERMSIG(st), strsignal(WTERMSIG(st)), what, sep,
                 tail);
    else
        snprintf(out, len, "exited with status %d during %s%s%s", WIFEXITED(st) ? WEXITSTATUS(st) : -1, what, sep,
                 tail);
}

/* The wait status the zygote reports for our worker (it writes it when the worker ends), or -1. */
static int worker_status(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int32_t st;
    if (fd < 0 || poll(&p, 1, 2000) <= 0 || read(fd, &st, sizeof st) != (ssize_t)sizeof st)
        return -1;
    return st;
}

static void worker_release(struct worker *w)
{
    if (w->arena != NULL)
        munmap(w->arena, w->arena_bytes);
    if (w->sock >= 0)
        close(w->sock);
    if (w->arena_fd >= 0)
        close(w->arena_fd);
    if (w->log_fd >= 0)
        close(w->log_fd);
    if (w->status_fd >= 0)
        close(w->status_fd);
    *w = (struct worker){.sock = -1, .arena_fd = -1, .log_fd = -1, .status_fd = -1};
}

/* One request and its reply; a dead worker makes every later call fail with how it died. */
static enum mc_backend_status call(int64_t f[N_FIELDS], const char *payload, size_t plen, int64_t *handle,
                                   const char *what, struct mc_msg *msg)
{
    if (!W.active || W.dead)
        return fail(msg, MC_BACKEND_INTERNAL, "python worker is gone (an earlier call ended it)");
    f[F_ARENA] = (int64_t)W.arena_bytes;
    f[F_POOL] = W.has_pool && P.owner == self_pid() ? (int64_t)P.mapped : 0;
    f[F_PAYLOAD] = (int64_t)plen;
    int64_t rep[4];
    if (mc_wire_send_all(W.sock, f, N_FIELDS * sizeof f[0]) != 0 || (plen && mc_wire_send_all(W.sock, payload, plen) != 0) ||
        mc_wire_recv_all(W.sock, rep, sizeof rep) != 0) {
        char how[MC_MSG_LEN];
        describe_end(worker_status(W.status_fd), W.log_fd, what, how, sizeof how);
        W.dead = 1;
        return fail(msg, MC_BACKEND_INTERNAL, "python worker %s", how);
    }
    char text[MC_MSG_LEN];
    text[0] = '\0';
    for (int64_t left = rep[2]; left > 0;) { /* the message, truncated to what fits */
        char chunk[512];
        size_t n = left > (int64_t)sizeof chunk ? sizeof chunk : (size_t)left;
        if (mc_wire_recv_all(W.sock, chunk, n) != 0) {
            W.dead = 1;
            return fail(msg, MC_BACKEND_INTERNAL, "python worker: short reply during %s", what);
        }
        size_t have = strlen(text), room = sizeof text - 1 - have;
        size_t take = (size_t)(rep[2] - left) < sizeof text ? (n < room ? n : room) : 0;
        memcpy(text + have, chunk, take);
        text[have + take] = '\0';
        left -= (int64_t)n;
    }
    if (rep[0] != MC_BACKEND_OK) {
        enum mc_backend_status st = rep[0] >= MC_BACKEND_UNSUPPORTED && rep[0] <= MC_BACKEND_INTERNAL
                                        ? (enum mc_backend_status)rep[0]
                                        : MC_BACKEND_INTERNAL;
        return fail(msg, st, "python %s: %s", what, text);
    }
    if (handle)
        *handle = rep[1];
    return MC_BACKEND_OK;
}

/* Asks the zygote for a worker of this process (once; again after one died). */
static enum mc_backend_status worker_ensure(struct mc_msg *msg)
{
    if (W.active && W.owner != self_pid()) {
        /* inherited through fork: the parent's worker, not ours to talk to */
        worker_release(&W);
    }
    if (W.active && !W.dead)
        return MC_BACKEND_OK;
    worker_release(&W);
    if (Z.pid == 0)
        return fail(msg, MC_BACKEND_INTERNAL, "python backends are not loaded (no zygote)");
    int sv[2] = {-1, -1}, st[2] = {-1, -1};
    W.arena_fd = memfd_create("mixcheck-arena", MFD_CLOEXEC);
    W.log_fd = memfd_create("mixcheck-python-worker-log", MFD_CLOEXEC);
    if (W.arena_fd < 0 || W.log_fd < 0 || ftruncate(W.arena_fd, (off_t)ARENA_MIN) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(st, O_CLOEXEC) != 0) {
        fail(msg, MC_BACKEND_NOMEM, "python worker: %s", strerror(errno));
        goto fail;
    }
    W.arena = mmap(NULL, ARENA_MIN, PROT_READ | PROT_WRITE, MAP_SHARED, W.arena_fd, 0);
    if (W.arena == MAP_FAILED) {
        W.arena = NULL;
        fail(msg, MC_BACKEND_NOMEM, "python worker: mmap: %s", strerror(errno));
        goto fail;
    }
    W.arena_bytes = ARENA_MIN;
    /* our pid and four descriptors, five with the pool's (none: every tensor goes through the arena):
     * the zygote forks a worker holding them */
    int64_t me = getpid();
    int with_pool = pool_ready() == 0;
    int fds[5] = {sv[1], W.arena_fd, W.log_fd, st[1], with_pool ? P.fd : -1};
    size_t nfd = with_pool ? 5 : 4;
    char ctl[CMSG_SPACE(sizeof fds)];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = &me, .iov_len = sizeof me};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                        .msg_controllen = CMSG_SPACE(nfd * sizeof fds[0])};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(nfd * sizeof fds[0]);
    memcpy(CMSG_DATA(cm), fds, nfd * sizeof fds[0]);
    if (sendmsg(Z.ctl, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof me) {
        char how[MC_MSG_LEN];
        describe_end(-1, Z.log, "a worker's start", how, sizeof how);
        fail(msg, MC_BACKEND_INTERNAL, "python zygote %s (%s)", how, strerror(errno));
        goto fail;
    }
    close(sv[1]);
    close(st[1]);
    W.sock = sv[0];
    W.status_fd = st[0];
    W.active = 1;
    W.owner = getpid();
    W.gen = ++generation;
    W.has_pool = with_pool;
    return MC_BACKEND_OK;
fail:
    for (int i = 0; i < 2; i++) {
        if (sv[i] >= 0)
            close(sv[i]);
        if (st[i] >= 0)
            close(st[i]);
    }
    worker_release(&W);
    return MC_BACKEND_NOMEM;
}

/* Room for `bytes` in the arena (grown, never shrunk). */
static enum mc_backend_status arena_reserve(size_t bytes, struct mc_msg *msg)
{
    if (bytes <= W.arena_bytes)
        return MC_BACKEND_OK;
    size_t size = W.arena_bytes * 2 > bytes ? W.arena_bytes * 2 : bytes;
    size = (size + 4095) & ~(size_t)4095;
    if (ftruncate(W.arena_fd, (off_t)size) != 0)
        return fail(msg, MC_BACKEND_NOMEM, "python worker: arena of %zu bytes: %s", size, strerror(errno));
    void *p = mremap(W.arena, W.arena_bytes, size, MREMAP_MAYMOVE);
    if (p == MAP_FAILED)
        return fail(msg, MC_BACKEND_NOMEM, "python worker: arena of %zu bytes: %s", size, strerror(errno));
    W.arena = p;
    W.arena_bytes = size;
    return MC_BACKEND_OK;
}

/* ---- the pool (host_map / host_unmap) ------------------------------------------------------- */

/* The pool of this process, made on first use: 0, or -1 when there is none to be had. */
static int pool_ready(void)
{
    if (P.owner == self_pid())
        return 0;
    if (P.owner != 0) { /* inherited through fork: the range is not mapped here (MADV_DONTFORK) */
        if (P.fd >= 0)
            close(P.fd);
        memset(&P, 0, sizeof P);
        P.fd = -1;
    }
    void *r = mmap(NULL, POOL_RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return -1;
    int fd = memfd_create("mixcheck-pool", MFD_CLOEXEC);
    if (fd < 0) {
        munmap(r, POOL_RESERVE);
        return -1;
    }
    madvise(r, POOL_RESERVE, MADV_DONTFORK);
    P.owner = getpid();
    P.fd = fd;
    P.base = r;
    P.mapped = 0;
    P.n = 0;
    return 0;
}

/* The pool grown by `more` bytes (whole pages), mapped in place after what is mapped. */
static int pool_grow(size_t more)
{
    if (more > POOL_RESERVE - P.mapped || ftruncate(P.fd, (off_t)(P.mapped + more)) != 0)
        return -1;
    void *p = mmap(P.base + P.mapped, more, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, P.fd, (off_t)P.mapped);
    if (p == MAP_FAILED) {
        if (ftruncate(P.fd, (off_t)P.mapped) != 0) {
        }
        return -1;
    }
    madvise(p, more, MADV_DONTFORK);
    P.mapped += more;
    return 0;
}

static void *host_map(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes == 0 || bytes % page != 0 || pool_ready() != 0)
        return NULL;
    int i = 0;
    while (i < P.n && (P.b[i].used || P.b[i].bytes < bytes))
        i++;
    if (i == P.n) { /* no free block fits: grow the pool (the last block, when free, grows into it) */
        int last_free = P.n > 0 && !P.b[P.n - 1].used;
        size_t have = last_free ? P.b[P.n - 1].bytes : 0;
        if ((!last_free && P.n == POOL_BLOCKS) || pool_grow(bytes - have) != 0)
            return NULL;
        if (last_free)
            P.b[--i].bytes = bytes;
        else
            P.b[P.n++] = (struct pool_block){.off = P.mapped - bytes, .bytes = bytes};
    }
    if (P.b[i].bytes > bytes) { /* split: the rest stays free */
        if (P.n == POOL_BLOCKS)
            return NULL;
        memmove(&P.b[i + 2], &P.b[i + 1], (size_t)(P.n - i - 1) * sizeof P.b[0]);
        P.b[i + 1] = (struct pool_block){.off = P.b[i].off + bytes, .bytes = P.b[i].bytes - bytes};
        P.b[i].bytes = bytes;
        P.n++;
    }
    P.b[i].used = 1;
    return P.base + P.b[i].off;
}

static void host_unmap(void *p, size_t bytes)
{
    if (p == NULL || P.owner != self_pid())
        return;
    size_t off = (size_t)((unsigned char *)p - P.base);
    int i = 0;
    while (i < P.n && P.b[i].off != off)
        i++;
    if (i == P.n || !P.b[i].used || P.b[i].bytes != bytes)
        return; /* not a block of ours: nothing to give back */
    P.b[i].used = 0;
    if (i + 1 < P.n && !P.b[i + 1].used) { /* merge with the free neighbours */
        P.b[i].bytes += P.b[i + 1].bytes;
        memmove(&P.b[i + 1], &P.b[i + 2], (size_t)(P.n - i - 2) * sizeof P.b[0]);
        P.n--;
    }
    if (i > 0 && !P.b[i - 1].used) {
        P.b[i - 1].bytes += P.b[i].bytes;
        memmove(&P.b[i], &P.b[i + 1], (size_t)(P.n - i - 1) * sizeof P.b[0]);
        P.n--;
    }
}

/* p[0, bytes) lies in the pool this process's worker maps: its offset there into *off. */
static int in_pool(const void *p, size_t bytes, int64_t *off)
{
    const unsigned char *c = p;
    if (!W.has_pool || P.owner != self_pid() || c == NULL || c < P.base || bytes > P.mapped ||
        (size_t)(c - P.base) > P.mapped - bytes)
        return 0;
    *off = (int64_t)(c - P.base);
    return 1;
}

static size_t place(size_t *used, size_t bytes)
{
    size_t o = (*used + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    *used = o + bytes;
    return o;
}

static struct py_model *live(struct mc_model *m, struct mc_msg *msg)
{
    struct py_model *pm = (struct py_model *)m;
    if (pm->gen != W.gen || W.owner != self_pid()) {
        fail(msg, MC_BACKEND_INTERNAL, "python worker of this model is gone (an earlier call ended it)");
        return NULL;
    }
    return pm;
}

/* ---- JSON for model_create --------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (isinf(v))
        fputs(v > 0 ? "Infinity" : "-Infinity", f); /* Python's json reads both */
    else {
        char b[40];
        snprintf(b, sizeof b, "%.17g", v);
        fprintf(f, strpbrk(b, ".eE") ? "%s" : "%s.0", b); /* a float in Python too */
    }
}

static void json_config(FILE *f, enum mc_family family, const void *config)
{
    size_t n = 0;
    const struct mc_config_field *fl = mc_family_config_fields(family, &n);
    fputc('{', f);
    for (size_t i = 0; i < n; i++) {
        const char *at = (const char *)config + fl[i].offset;
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, fl[i].name);
        fputs(": ", f);
        int32_t i32;
        int64_t i64;
        double d[2];
        switch (fl[i].kind) {
        case MC_FIELD_INT:
            memcpy(&i64, at, sizeof i64);
            fprintf(f, "%lld", (long long)i64);
            break;
        case MC_FIELD_BOOL:
            memcpy(&i32, at, sizeof i32);
            fputs(i32 ? "true" : "false", f);
            break;
        case MC_FIELD_DOUBLE:
            memcpy(d, at, sizeof d[0]);
            json_num(f, d[0]);
            break;
        case MC_FIELD_DOUBLE_PAIR:
            memcpy(d, at, sizeof d);
            fputc('[', f);
            json_num(f, d[0]);
            fputs(", ", f);
            json_num(f, d[1]);
            fputc(']', f);
            break;
        case MC_FIELD_GDN_LAYOUT:
            memcpy(&i32, at, sizeof i32);
            fputs(i32 == MC_GDN_LAYOUT_QWEN3_NEXT ? "\"qwen3_next\"" : "\"qwen3_5\"", f);
            break;
        case MC_FIELD_QK_NORM:
            memcpy(&i32, at, sizeof i32);
            json_str(f, mc_qk_norm_name(i32));
            break;
        }
    }
    fputc('}', f);
}

static size_t family_config_size(enum mc_family f)
{
    switch (f) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2:
        return sizeof(struct mc_mamba2_config);
    case MC_FAMILY_MAMBA1:
        return sizeof(struct mc_mamba1_config);
    case MC_FAMILY_GDN:
        return sizeof(struct mc_gdn_config);
    case MC_FAMILY_SHORTCONV:
        return sizeof(struct mc_shortconv_config);
    case MC_FAMILY_ATTENTION:
        return sizeof(struct mc_attention_config);
    case MC_FAMILY_LIGHTNING:
        return sizeof(struct mc_lightning_config);
    case MC_FAMILY_KDA:
        return sizeof(struct mc_kda_config);
    }
    return 0;
}

static const char *dtype_name(enum mc_dtype d)
{
    return d == MC_DTYPE_F64 ? "f64" : d == MC_DTYPE_F32 ? "f32" : d == MC_DTYPE_F16 ? "f16" : "bf16";
}

/* ---- the ops ------------------------------------------------------------------------------------ */

/* The weights into the arena, back to back, and their list `, "weights": [{name, shape, offset}...]` into f. */
static enum mc_backend_status stage_weights(const struct mc_weight *w, int32_t n, size_t es, FILE *f,
                                            struct mc_msg *msg)
{
    size_t used = 0, *offs = calloc((size_t)n + 1, sizeof *offs), *elems = calloc((size_t)n + 1, sizeof *elems);
    enum mc_backend_status st = MC_BACKEND_OK;
    if (offs == NULL || elems == NULL)
        st = fail(msg, MC_BACKEND_NOMEM, "out of memory");
    for (int i = 0; st == MC_BACKEND_OK && i < n; i++) {
        elems[i] = 1;
        for (int d = 0; d < w[i].ndim; d++)
            elems[i] *= (size_t)w[i].dims[d];
        offs[i] = place(&used, elems[i] * es);
    }
    if (st == MC_BACKEND_OK)
        st = arena_reserve(used, msg);
    if (st == MC_BACKEND_OK) {
        fputs(", \"weights\": [", f);
        for (int i = 0; i < n; i++) {
            memcpy(W.arena + offs[i], w[i].data, elems[i] * es);
            fputs(i ? ", {\"name\": " : "{\"name\": ", f);
            json_str(f, w[i].name);
            fputs(", \"shape\": [", f);
            for (int d = 0; d < w[i].ndim; d++)
                fprintf(f, "%s%lld", d ? ", " : "", (long long)w[i].dims[d]);
            fprintf(f, "], \"offset\": %zu}", offs[i]);
        }
        fputs("]", f);
    }
    free(offs);
    free(elems);
    return st;
}

static enum mc_backend_status model_create(int k, const struct mc_model_desc *desc, struct mc_model **model,
                                           struct mc_msg *msg)
{
    const struct slot *s = &slots[k];
    *model = NULL;
    if (desc->family != s->ops.family)
        return fail(msg, MC_BACKEND_INVALID, "a %s model for a %s backend", mc_family_name(desc->family),
                    mc_family_name(s->ops.family));
    if (!(s->ops.dtypes & MC_DTYPE_BIT(desc->dtype)))
        return fail(msg, MC_BACKEND_UNSUPPORTED, "%s does not take %s", s->name, dtype_name(desc->dtype));
    enum mc_backend_status st = worker_ensure(msg);
    if (st != MC_BACKEND_OK)
        return st;
    struct py_model *pm = calloc(1, sizeof *pm);
    if (pm == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    pm->slot = k;
    pm->gen = W.gen;
    pm->dtype = desc->dtype;
    pm->es = mc_dtype_size(desc->dtype);
    pm->ss = desc->dtype == MC_DTYPE_F64 ? 8 : 4;
    struct mc_family_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.family = desc->family;
    memcpy(&cfg.u, desc->config, family_config_size(desc->family));
    mc_family_shape(&cfg, &pm->sh);
    char *json = NULL;
    size_t json_len = 0;
    FILE *f = open_memstream(&json, &json_len);
    if (f == NULL) {
        free(pm);
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    }
    fputs("{\"spec\": ", f);
    json_str(f, s->spec);
    fputs(", \"attr\": ", f);
    json_str(f, s->attr);
    fprintf(f, ", \"family\": \"%s\", \"dtype\": \"%s\", \"device\": ", mc_family_name(desc->family),
            dtype_name(desc->dtype));
    json_str(f, s->ops.device);
    fprintf(f, ", \"chunk_size\": %lld, \"threads\": %d, \"hidden\": %lld, \"conv_shape\": [%lld, %lld]",
            (long long)desc->chunk_size, (int)desc->threads, (long long)pm->sh.hidden,
            (long long)pm->sh.conv_channels, (long long)pm->sh.conv_kernel);
    fputs(", \"state_shape\": [", f);
    for (int d = 0; d < pm->sh.state_ndim; d++)
        fprintf(f, "%s%lld", d ? ", " : "", (long long)pm->sh.state_dims[d]);
    fputs("], \"config\": ", f);
    json_config(f, desc->family, desc->config);
    st = stage_weights(desc->weights, desc->n_weights, pm->es, f, msg);
    fputs("}", f);
    if (fclose(f) != 0 && st == MC_BACKEND_OK)
        st = fail(msg, MC_BACKEND_NOMEM, "out of memory");
    if (st == MC_BACKEND_OK) {
        int64_t req[N_FIELDS] = {[F_OP] = OP_CREATE};
        st = call(req, json, json_len, &pm->h, "model_create", msg);
    }
    free(json);
    if (st != MC_BACKEND_OK) {
        free(pm);
        return st;
    }
    *model = (struct mc_model *)pm;
    return MC_BACKEND_OK;
}

static void model_destroy(struct mc_model *m)
{
    struct mc_msg msg;
    struct py_model *pm = (struct py_model *)m;
    if (pm == NULL)
        return;
    if (live(m, &msg) != NULL && !W.dead) {
        int64_t req[N_FIELDS] = {[F_OP] = OP_DESTROY, [F_MODEL] = pm->h};
        call(req, NULL, 0, NULL, "model_destroy", &msg);
    }
    free(pm->layers);
    free(pm);
}

static enum mc_backend_status cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **cache,
                                          struct mc_msg *msg)
{
    *cache = NULL;
    struct py_model *pm = live(m, msg);
    if (pm == NULL)
        return MC_BACKEND_INTERNAL;
    struct py_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    c->batch = batch;
    int64_t req[N_FIELDS] = {[F_OP] = OP_CACHE_ALLOC, [F_MODEL] = pm->h, [F_BATCH] = batch};
    enum mc_backend_status st = call(req, NULL, 0, &c->h, "cache_alloc", msg);
    if (st != MC_BACKEND_OK) {
        free(c);
        return st;
    }
    *cache = (struct mc_cache *)c;
    return MC_BACKEND_OK;
}

static enum mc_backend_status cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                         struct mc_msg *msg)
{
    struct py_model *pm = live(m, msg);
    if (pm == NULL)
        return MC_BACKEND_INTERNAL;
    const struct py_cache *d = (const struct py_cache *)dst, *s = (const struct py_cache *)src;
    if (d->batch != s->batch)
        return fail(msg, MC_BACKEND_INVALID, "cache_copy: batch %lld into batch %lld", (long long)s->batch,
                    (long long)d->batch);
    int64_t req[N_FIELDS] = {[F_OP] = OP_CACHE_COPY, [F_MODEL] = pm->h, [F_CACHE] = d->h, [F_CACHE2] = s->h};
    return call(req, NULL, 0, NULL, "cache_copy", msg);
}

static void cache_free(struct mc_model *m, struct mc_cache *cache)
{
    struct mc_msg msg;
    struct py_cache *c = (struct py_cache *)cache;
    if (c == NULL)
        return;
    struct py_model *pm = live(m, &msg);
    if (pm != NULL && !W.dead) {
        int64_t req[N_FIELDS] = {[F_OP] = OP_CACHE_FREE, [F_MODEL] = pm->h, [F_CACHE] = c->h};
        call(req, NULL, 0, NULL, "cache_free", &msg);
    }
    free(c);
}

static size_t conv_bytes(const struct py_model *pm, int64_t batch)
{
    return (size_t)batch * (size_t)pm->sh.conv_channels * (size_t)pm->sh.conv_kernel * pm->ss;
}

static size_t state_bytes(const struct py_model *pm, int64_t batch)
{
    return (size_t)batch * (size_t)mc_family_state_elems(&pm->sh) * pm->ss;
}

/* cache_export / cache_import: the live model and cache, the byte sizes of the conv window and the
 * state of the cache's rows and their offsets in the arena (reserved to hold both). */
struct cache_io {
    struct py_model *pm;
    const struct py_cache *c;
    size_t cb, sb, oc, os;
};

static enum mc_backend_status cache_io_begin(struct mc_model *m, const struct mc_cache *cache, struct cache_io *io,
                                             struct mc_msg *msg)
{
    io->pm = live(m, msg);
    if (io->pm == NULL)
        return MC_BACKEND_INTERNAL;
    io->c = (const struct py_cache *)cache;
    size_t used = 0;
    io->cb = conv_bytes(io->pm, io->c->batch);
    io->sb = state_bytes(io->pm, io->c->batch);
    io->oc = place(&used, io->cb);
    io->os = place(&used, io->sb);
    return arena_reserve(used, msg);
}

static enum mc_backend_status cache_export(struct mc_model *m, const struct mc_cache *cache, void *conv_state,
                                           void *recurrent_state, struct mc_msg *msg)
{
    struct cache_io io;
    enum mc_backend_status st = cache_io_begin(m, cache, &io, msg);
    if (st != MC_BACKEND_OK)
        return st;
    int64_t req[N_FIELDS] = {[F_OP] = OP_CACHE_EXPORT, [F_MODEL] = io.pm->h, [F_CACHE] = io.c->h,
                             [F_A] = (int64_t)io.oc, [F_B] = (int64_t)io.os};
    st = call(req, NULL, 0, NULL, "cache_export", msg);
    if (st != MC_BACKEND_OK)
        return st;
    memcpy(conv_state, W.arena + io.oc, io.cb);
    if (io.sb && recurrent_state != NULL)
        memcpy(recurrent_state, W.arena + io.os, io.sb);
    return MC_BACKEND_OK;
}

static enum mc_backend_status cache_import(struct mc_model *m, struct mc_cache *cache, const void *conv_state,
                                           const void *recurrent_state, struct mc_msg *msg)
{
    struct cache_io io;
    enum mc_backend_status st = cache_io_begin(m, cache, &io, msg);
    if (st != MC_BACKEND_OK)
        return st;
    memcpy(W.arena + io.oc, conv_state, io.cb);
    if (io.sb) {
        if (recurrent_state == NULL)
            return fail(msg, MC_BACKEND_INVALID, "cache_import: no recurrent state");
        memcpy(W.arena + io.os, recurrent_state, io.sb);
    }
    int64_t req[N_FIELDS] = {[F_OP] = OP_CACHE_IMPORT, [F_MODEL] = io.pm->h, [F_CACHE] = io.c->h,
                             [F_A] = (int64_t)io.oc, [F_B] = (int64_t)io.os};
    return call(req, NULL, 0, NULL, "cache_import", msg);
}

/* One tensor argument of a call: its request field, the harness's pointer (in: read by the worker;
 * out: written by it) and its bytes. */
struct arg {
    int field;
    const void *in;
    void *out;
    size_t bytes;
};

/* Each argument's offset into req: the pool's when it lies there (bit F_WHERE; no copy), else a place
 * in the arena, an input copied into it; an absent input (NULL) is -1. */
static enum mc_backend_status stage_args(struct arg *args, int n, int64_t req[N_FIELDS], size_t *used,
                                         struct mc_msg *msg)
{
    size_t at[8];
    for (int i = 0; i < n; i++) {
        const void *p = args[i].in != NULL ? args[i].in : args[i].out;
        int64_t off;
        at[i] = 0;
        if (p == NULL)
            req[args[i].field] = -1;
        else if (in_pool(p, args[i].bytes, &off)) {
            req[args[i].field] = off;
            req[F_WHERE] |= IN_POOL(args[i].field);
        } else
            at[i] = place(used, args[i].bytes), req[args[i].field] = (int64_t)at[i];
    }
    enum mc_backend_status st = arena_reserve(*used, msg);
    for (int i = 0; st == MC_BACKEND_OK && i < n; i++)
        if (args[i].in != NULL && !(req[F_WHERE] & IN_POOL(args[i].field)))
            memcpy(W.arena + at[i], args[i].in, args[i].bytes);
    return st;
}

/* The outputs that went through the arena, copied out of it. */
static void unstage_args(const struct arg *args, int n, const int64_t req[N_FIELDS])
{
    for (int i = 0; i < n; i++)
        if (args[i].out != NULL && !(req[F_WHERE] & IN_POOL(args[i].field)))
            memcpy(args[i].out, W.arena + req[args[i].field], args[i].bytes);
}

static enum mc_backend_status forward(struct mc_model *m, struct mc_cache *cache, const struct mc_forward_args *a,
                                      struct mc_msg *msg)
{
    struct py_model *pm = live(m, msg);
    if (pm == NULL)
        return MC_BACKEND_INTERNAL;
    const struct py_cache *c = (const struct py_cache *)cache;
    if (a->batch < 1 || a->len < 1)
        return fail(msg, MC_BACKEND_INVALID, "forward: batch %lld, len %lld", (long long)a->batch, (long long)a->len);
    if (c != NULL && c->batch != a->batch)
        return fail(msg, MC_BACKEND_INVALID, "forward: batch %lld on a cache of %lld rows", (long long)a->batch,
                    (long long)c->batch);
    size_t tokens = (size_t)a->batch * (size_t)a->len, xb = tokens * (size_t)pm->sh.hidden * pm->es;
    int64_t req[N_FIELDS] = {[F_OP] = OP_FORWARD, [F_MODEL] = pm->h, [F_CACHE] = c ? c->h : 0,
                             [F_BATCH] = a->batch, [F_LEN] = a->len, [F_MASK] = -1};
    /* what lies in the pool (host_map) the worker reads and writes there; the rest goes through the arena */
    size_t used = 0;
    struct arg args[] = {{F_X, a->x, NULL, xb}, {F_MASK, a->mask, NULL, tokens}, {F_Y, NULL, a->y, xb}};
    enum mc_backend_status st = stage_args(args, 3, req, &used, msg);
    if (st == MC_BACKEND_OK)
        st = call(req, NULL, 0, NULL, "forward", msg);
    if (st == MC_BACKEND_OK)
        unstage_args(args, 3, req);
    return st;
}

static enum mc_backend_status forward_packed(struct mc_model *m, struct mc_cache *pool,
                                             const struct mc_packed_args *a, struct mc_msg *msg)
{
    struct py_model *pm = live(m, msg);
    if (pm == NULL)
        return MC_BACKEND_INTERNAL;
    const struct py_cache *c = (const struct py_cache *)pool;
    if (c == NULL || a->n_seqs < 0)
        return fail(msg, MC_BACKEND_INVALID, "forward_packed: no pool or a negative count");
    int64_t n = a->n_seqs, T = a->cu_seqlens[n];
    size_t xb = (size_t)T * (size_t)pm->sh.hidden * pm->es, used = 0;
    int64_t req[N_FIELDS] = {[F_OP] = OP_FORWARD_PACKED, [F_MODEL] = pm->h, [F_CACHE] = c->h,
                             [F_LEN] = T,                [F_N] = n,         [F_MASK] = -1};
    struct arg args[] = {{F_X, a->x, NULL, xb},
                         {F_A, a->cu_seqlens, NULL, (size_t)(n + 1) * 8},
                         {F_B, a->slots, NULL, (size_t)n * 8},
                         {F_C, a->has_initial_state, NULL, (size_t)n},
                         {F_Y, NULL, a->y, xb}};
    enum mc_backend_status st = stage_args(args, 5, req, &used, msg);
    if (st == MC_BACKEND_OK)
        st = call(req, NULL, 0, NULL, "forward_packed", msg);
    if (st == MC_BACKEND_OK)
        unstage_args(args, 5, req);
    return st;
}

/* ---- whole stacks (MC_FAMILY_STACK) ------------------------------------------------------------- */

/* A whole-stack model: the layer shapes come from mixcheck's own reading of the config.json
 * (stackconfig.c), so that the buffers of stack_cache_export have the sizes the harness gives them. */
static enum mc_backend_status stack_create(int k, const struct mc_stack_desc *desc, struct mc_model **model,
                                           struct mc_msg *msg)
{
    const struct slot *s = &slots[k];
    *model = NULL;
    if (!(s->ops.dtypes & MC_DTYPE_BIT(desc->dtype)))
        return fail(msg, MC_BACKEND_UNSUPPORTED, "%s does not take %s", s->name, dtype_name(desc->dtype));
    if (desc->model_type == NULL || desc->config_json == NULL)
        return fail(msg, MC_BACKEND_INVALID, "stack_create: no model_type or config_json");
    struct mc_stack_config *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    struct mc_error err;
    memset(&err, 0, sizeof err);
    enum mc_model_type type;
    if (mc_model_type_from_name(desc->model_type, &type) != 0) {
        free(cfg);
        return fail(msg, MC_BACKEND_UNSUPPORTED, "model_type '%s' is not one mixcheck knows", desc->model_type);
    }
    if (mc_stack_config_parse(desc->model_type, desc->config_json, "stack_create", cfg, &err) != MC_ERR_NONE) {
        free(cfg);
        return fail(msg, MC_BACKEND_INVALID, "%s", err.msg);
    }
    enum mc_backend_status st = worker_ensure(msg);
    struct py_model *pm = st == MC_BACKEND_OK ? calloc(1, sizeof *pm) : NULL;
    if (pm != NULL)
        pm->layers = calloc((size_t)cfg->n_layers + 1, sizeof *pm->layers);
    if (st == MC_BACKEND_OK && (pm == NULL || pm->layers == NULL)) {
        if (pm != NULL)
            free(pm->layers);
        free(pm);
        free(cfg);
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    }
    if (st != MC_BACKEND_OK) {
        free(cfg);
        return st;
    }
    pm->slot = k;
    pm->gen = W.gen;
    pm->dtype = desc->dtype;
    pm->es = mc_dtype_size(desc->dtype);
    pm->ss = desc->dtype == MC_DTYPE_F64 ? 8 : 4;
    pm->sh.hidden = cfg->hidden;
    pm->vocab = cfg->vocab;
    pm->n_layers = cfg->n_layers;
    char *json = NULL;
    size_t json_len = 0;
    FILE *f = open_memstream(&json, &json_len);
    if (f == NULL)
        st = fail(msg, MC_BACKEND_NOMEM, "out of memory");
    if (f != NULL) {
        fputs("{\"spec\": ", f);
        json_str(f, s->spec);
        fputs(", \"attr\": ", f);
        json_str(f, s->attr);
        fprintf(f, ", \"dtype\": \"%s\", \"device\": ", dtype_name(desc->dtype));
        json_str(f, s->ops.device);
        fputs(", \"model_type\": ", f);
        json_str(f, desc->model_type);
        fputs(", \"config_json\": ", f);
        json_str(f, desc->config_json);
        fprintf(f, ", \"threads\": %d, \"hidden\": %lld, \"vocab\": %lld, \"layers\": [", (int)desc->threads,
                (long long)cfg->hidden, (long long)cfg->vocab);
        for (int64_t i = 0; i < cfg->n_layers; i++) {
            struct mc_family_shape *sh = &pm->layers[i];
            mc_stack_layer_shape(cfg, i, sh);
            fprintf(f, "%s{\"family\": \"%s\", \"conv_shape\": [%lld, %lld], \"state_shape\": [", i ? ", " : "",
                    mc_family_name(cfg->layers[i].family), (long long)sh->conv_channels, (long long)sh->conv_kernel);
            for (int d = 0; d < sh->state_ndim; d++)
                fprintf(f, "%s%lld", d ? ", " : "", (long long)sh->state_dims[d]);
            fputs("]}", f);
        }
        fputs("]", f);
        st = stage_weights(desc->weights, desc->n_weights, pm->es, f, msg);
        fputs("}", f);
        if (fclose(f) != 0 && st == MC_BACKEND_OK)
            st = fail(msg, MC_BACKEND_NOMEM, "out of memory");
    }
    free(cfg);
    if (st == MC_BACKEND_OK) {
        int64_t req[N_FIELDS] = {[F_OP] = OP_STACK_CREATE};
        st = call(req, json, json_len, &pm->h, "stack_create", msg);
    }
    free(json);
    if (st != MC_BACKEND_OK) {
        free(pm->layers);
        free(pm);
        return st;
    }
    *model = (struct mc_model *)pm;
    return MC_BACKEND_OK;
}

static enum mc_backend_status stack_forward(struct mc_model *m, struct mc_cache *cache, const struct mc_stack_args *a,
                                            struct mc_msg *msg)
{
    struct py_model *pm = live(m, msg);
    if (pm == NULL)
        return MC_BACKEND_INTERNAL;
    if (pm->layers == NULL)
        return fail(msg, MC_BACKEND_INVALID, "stack_forward on a mixer model");
    const struct py_cache *c = (const struct py_cache *)cache;
    if (a->batch < 1 || a->len < 1 || a->input_ids == NULL || a->logits == NULL)
        return fail(msg, MC_BACKEND_INVALID, "stack_forward: batch %lld, len %lld%s", (long long)a->batch,
                    (long long)a->len, a->input_ids == NULL || a->logits == NULL ? ", no input_ids or logits" : "");
    if (c != NULL && c->batch != a->batch)
        return fail(msg, MC_BACKEND_INVALID, "stack_forward: batch %lld on a cache of %lld rows",
                    (long long)a->batch, (long long)c->batch);
    size_t tokens = (size_t)a->batch * (size_t)a->len, level = tokens * (size_t)pm->sh.hidden * pm->ss;
    size_t lb = tokens * (size_t)pm->vocab * pm->ss, hb = (size_t)(pm->n_layers + 1) * level,
           mb = (size_t)pm->n_layers * level;
    size_t used = 0, oi = place(&used, tokens * sizeof(int64_t)), ol = place(&used, lb),
           om = a->mask ? place(&used, tokens) : 0, oh = a->hidden_states ? place(&used, hb) : 0,
           ox = a->mixer_outputs ? place(&used, mb) : 0, on = a->mixer_inputs ? place(&used, mb) : 0;
    enum mc_backend_status st = arena_reserve(used, msg);
    if (st != MC_BACKEND_OK)
        return st;
    memcpy(W.arena + oi, a->input_ids, tokens * sizeof(int64_t));
    if (a->mask)
        memcpy(W.arena + om, a->mask, tokens);
    int64_t req[N_FIELDS] = {[F_OP] = OP_STACK_FORWARD,
                             [F_MODEL] = pm->h,
                             [F_CACHE] = c ? c->h : 0,
                             [F_BATCH] = a->batch,
                             [F_LEN] = a->len,
                             [F_X] = (int64_t)oi,
                             [F_Y] = (int64_t)ol,
                             [F_MASK] = a->mask ? (int64_t)om : -1,
                             [F_A] = a->hidden_states ? (int64_t)oh : -1,
                             [F_B] = a->mixer_outputs ? (int64_t)ox : -1,
                             [F_C] = a->mixer_inputs ? (int64_t)on : -1};
    st = call(req, NULL, 0, NULL, "stack_forward", msg);
    if (st != MC_BACKEND_OK)
        return st;
    memcpy(a->logits, W.arena + ol, lb);
    if (a->hidden_states)
        memcpy(a->hidden_states, W.arena + oh, hb);
    if (a->mixer_outputs)
        memcpy(a->mixer_outputs, W.arena + ox, mb);
    if (a->mixer_inputs)
        memcpy(a->mixer_inputs, W.arena + on, mb);
    return MC_BACKEND_OK;
}

static enum mc_backend_status stack_cache_export(struct mc_model *m, const struct mc_cache *cache, int64_t layer,
                                                 void *conv_state, void *recurrent_state, struct mc_msg *msg)
{
    struct py_model *pm = live(m, msg);
    if (pm == NULL)
        return MC_BACKEND_INTERNAL;
    if (pm->layers == NULL)
        return fail(msg, MC_BACKEND_INVALID, "stack_cache_export on a mixer model");
    if (layer < 0 || layer >= pm->n_layers)
        return fail(msg, MC_BACKEND_INVALID, "stack_cache_export: no layer %lld (the model has %lld)",
                    (long long)layer, (long long)pm->n_layers);
    const struct py_cache *c = (const struct py_cache *)cache;
    const struct mc_family_shape *sh = &pm->layers[layer];
    size_t cb = (size_t)c->batch * (size_t)sh->conv_channels * (size_t)sh->conv_kernel * pm->ss;
    size_t sb = (size_t)c->batch * (size_t)mc_family_state_elems(sh) * pm->ss;
    size_t used = 0, oc = place(&used, cb), os = place(&used, sb);
    enum mc_backend_status st = arena_reserve(used, msg);
    if (st != MC_BACKEND_OK)
        return st;
    int64_t req[N_FIELDS] = {[F_OP] = OP_STACK_CACHE_EXPORT, [F_MODEL] = pm->h, [F_CACHE] = c->h,
                             [F_N] = layer, [F_A] = (int64_t)oc, [F_B] = (int64_t)os};
    st = call(req, NULL, 0, NULL, "stack_cache_export", msg);
    if (st != MC_BACKEND_OK)
        return st;
    if (conv_state != NULL)
        memcpy(conv_state, W.arena + oc, cb);
    if (sb && recurrent_state != NULL)
        memcpy(recurrent_state, W.arena + os, sb);
    return MC_BACKEND_OK;
}

/* model_create has no backend argument: one entry point per slot tells them apart. */
#define CREATE(k)                                                                                                 \
    static enum mc_backend_status create_##k(const struct mc_model_desc *d, struct mc_model **m, struct mc_msg *g) \
    {                                                                                                             \
        return model_create(k, d, m, g);                                                                          \
    }                                                                                                             \
    static enum mc_backend_status stack_create_##k(const struct mc_stack_desc *d, struct mc_model **m,            \
                                                   struct mc_msg *g)                                              \
    {                                                                                                             \
        return stack_create(k, d, m, g);                                                                          \
    }
#define CREATE4(a, b, c, d) CREATE(a) CREATE(b) CREATE(c) CREATE(d)
CREATE4(0, 1, 2, 3)
CREATE4(4, 5, 6, 7)
CREATE4(8, 9, 10, 11)
CREATE4(12, 13, 14, 15)
CREATE4(16, 17, 18, 19)
CREATE4(20, 21, 22, 23)
CREATE4(24, 25, 26, 27)
CREATE4(28, 29, 30, 31)
typedef enum mc_backend_status (*create_fn)(const struct mc_model_desc *, struct mc_model **, struct mc_msg *);
static const create_fn creates[MC_PYTHON_MAX_BACKENDS] = {
    create_0,  create_1,  create_2,  create_3,  create_4,  create_5,  create_6,  create_7,
    create_8,  create_9,  create_10, create_11, create_12, create_13, create_14, create_15,
    create_16, create_17, create_18, create_19, create_20, create_21, create_22, create_23,
    create_24, create_25, create_26, create_27, create_28, create_29, create_30, create_31,
};
typedef enum mc_backend_status (*stack_create_fn)(const struct mc_stack_desc *, struct mc_model **, struct mc_msg *);
static const stack_create_fn stack_creates[MC_PYTHON_MAX_BACKENDS] = {
    stack_create_0,  stack_create_1,  stack_create_2,  stack_create_3,  stack_create_4,  stack_create_5,
    stack_create_6,  stack_create_7,  stack_create_8,  stack_create_9,  stack_create_10, stack_create_11,
    stack_create_12, stack_create_13, stack_create_14, stack_create_15, stack_create_16, stack_create_17,
    stack_create_18, stack_create_19, stack_create_20, stack_create_21, stack_create_22, stack_create_23,
    stack_create_24, stack_create_25, stack_create_26, stack_create_27, stack_create_28, stack_create_29,
    stack_create_30, stack_create_31,
};

/* ---- loading ------------------------------------------------------------------------------------ */

/* Starts the zygote on every spec and returns its description (JSON, malloc'd). */
static int start_zygote(const struct mc_python_options *opt, const char *const *specs, int n, char **text,
                        struct mc_error *err)
{
    char why[256];
    *text = NULL;
    if (spawn_zygote(opt->python, specs, n, why, sizeof why) != 0)
        return mc_error_set(err, MC_ERR_INPUT, "--python-backend: %s", why);
    size_t cap = (size_t)1 << 20;
    char *buf = malloc(cap + 1);
    ssize_t got = buf ? recv(Z.ctl, buf, cap, 0) : -1;
    int64_t status = -1;
    if (got >= 8) {
        memcpy(&status, buf, 8);
        memmove(buf, buf + 8, (size_t)got - 8);
        buf[got - 8] = '\0';
    }
    if (got >= 8 && status == 0) {
        *text = buf;
        return MC_ERR_NONE;
    }
    /* it failed: reap it and say why */
    close(Z.ctl);
    Z.ctl = -1;
    int st = -1;
    while (waitpid(Z.pid, &st, 0) < 0 && errno == EINTR) {
    }
    Z.pid = 0;
    char how[MC_MSG_LEN];
    describe_end(st, Z.log, "its start", how, sizeof how);
    close(Z.log);
    Z.log = -1;
    if (got >= 8)
        mc_error_set(err, MC_ERR_INPUT, "--python-backend %s", buf); /* "SPEC: what went wrong" */
    else
        mc_error_set(err, MC_ERR_INPUT, "--python-backend: the interpreter '%s' %s", opt->python, how);
    free(buf);
    return err->code;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* A string member of a JSON object, or NULL (absent, null or not a string). */
static const char *json_string_at(const struct mc_json_value *obj, const char *key)
{
    const struct mc_json_value *v = obj ? mc_json_get(obj, key) : NULL;
    return v != NULL && v->type == MC_JSON_STRING ? v->string : NULL;
}

/* Keeps the description's interpreter, spec files (hashed here, as plugins are) and package versions. */
static void record_provenance(const struct mc_python_options *opt, const struct mc_json_value *root)
{
    memset(&prov, 0, sizeof prov);
    prov.present = 1;
    const struct mc_json_value *py = mc_json_get(root, "python"), *files = mc_json_get(root, "specs");
    const char *exe = json_string_at(py, "executable"), *ver = json_string_at(py, "version");
    snprintf(prov.interpreter, sizeof prov.interpreter, "%s", opt->python ? opt->python : "python3");
    snprintf(prov.executable, sizeof prov.executable, "%s", exe ? exe : "");
    snprintf(prov.version, sizeof prov.version, "%s", ver ? ver : "");
    const struct mc_json_value *pk = py ? mc_json_get(py, "packages") : NULL;
    for (size_t i = 0; pk != NULL && pk->type == MC_JSON_OBJECT && i < pk->len; i++) {
        if (prov.n_packages >= MC_PROVENANCE_MAX_PACKAGES)
            break;
        struct mc_provenance_package *p = &prov.packages[prov.n_packages++];
        snprintf(p->name, sizeof p->name, "%s", pk->keys[i]);
        snprintf(p->version, sizeof p->version, "%s",
                 pk->items[i].type == MC_JSON_STRING ? pk->items[i].string : "");
    }
    for (size_t i = 0; files != NULL && files->type == MC_JSON_ARRAY && i < files->len; i++) {
        const char *sp = json_string_at(&files->items[i], "spec");
        if (sp != NULL)
            mc_provenance_add_python_spec(&prov, sp, json_string_at(&files->items[i], "path"));
    }
}

const struct mc_provenance_python *mc_python_provenance(void)
{
    return &prov;
}

enum mc_err_code mc_python_load(const struct mc_python_options *opt, const char *const *specs, int n_specs,
                                struct mc_registry *reg, int first_plugin, struct mc_error *err)
{
    char *text = NULL;
    if (Z.pid != 0)
        return mc_error_set(err, MC_ERR_INTERNAL, "python backends are loaded once per run");
    if (start_zygote(opt, specs, n_specs, &text, err) != MC_ERR_NONE)
        return err->code;
    const char *spec = n_specs == 1 ? specs[0] : "(several)";
    struct mc_json_value *root = NULL;
    struct mc_json_error je;
    const struct mc_json_value *list = NULL;
    if (mc_json_parse(text, strlen(text), NULL, &root, &je) != 0 || root->type != MC_JSON_OBJECT ||
        (list = mc_json_get(root, "backends")) == NULL || list->type != MC_JSON_ARRAY) {
        mc_error_set(err, MC_ERR_INTERNAL, "--python-backend %s: unreadable description (%s)", spec,
                     root ? "no list of backends" : je.msg);
        free(text);
        mc_json_free(root);
        return err->code;
    }
    free(text);
    record_provenance(opt, root);
    for (size_t i = 0; i < list->len && err->code == MC_ERR_NONE; i++) {
        const struct mc_json_value *e = &list->items[i], *from = mc_json_get(e, "spec");
        int plugin = first_plugin;
        for (int k = 0; from != NULL && from->type == MC_JSON_STRING && k < n_specs; k++)
            if (strcmp(from->string, specs[k]) == 0)
                plugin = first_plugin + k;
        spec = from != NULL && from->type == MC_JSON_STRING ? from->string : spec;
        const struct mc_json_value *name = mc_json_get(e, "name"), *fam = mc_json_get(e, "family"),
                                   *attr = mc_json_get(e, "attr"), *dts = mc_json_get(e, "dtypes"),
                                   *packed = mc_json_get(e, "packed"), *hidden = mc_json_get(e, "hidden"),
                                   *chunked = mc_json_get(e, "chunked");
        enum mc_family family = MC_FAMILY_STACK;
        if (name == NULL || fam == NULL || attr == NULL || dts == NULL || packed == NULL ||
            fam->type != MC_JSON_STRING ||
            (strcmp(fam->string, "stack") != 0 && mc_family_from_name(fam->string, &family) != 0)) {
            mc_error_set(err, MC_ERR_INTERNAL, "--python-backend %s: malformed description", spec);
            break;
        }
        if (n_slots >= MC_PYTHON_MAX_BACKENDS) {
            mc_error_set(err, MC_ERR_USAGE, "--python-backend %s: at most %d Python backends", spec,
                         MC_PYTHON_MAX_BACKENDS);
            break;
        }
        struct slot *s = &slots[n_slots];
        memset(s, 0, sizeof *s);
        s->name = dup_str(name->string);
        s->spec = dup_str(spec);
        s->attr = dup_str(attr->string);
        s->opt = opt;
        if (s->name == NULL || s->spec == NULL || s->attr == NULL) {
            free(s->name), free(s->spec), free(s->attr);
            mc_error_set(err, MC_ERR_NOMEM, "out of memory");
            break;
        }
        uint32_t bits = 0;
        for (size_t d = 0; d < dts->len; d++) {
            const char *t = dts->items[d].string;
            bits |= strcmp(t, "f64") == 0   ? MC_DTYPE_BIT(MC_DTYPE_F64)
                    : strcmp(t, "f32") == 0 ? MC_DTYPE_BIT(MC_DTYPE_F32)
                    : strcmp(t, "f16") == 0 ? MC_DTYPE_BIT(MC_DTYPE_F16)
                                            : MC_DTYPE_BIT(MC_DTYPE_BF16);
        }
        if (family == MC_FAMILY_STACK) {
            /* a whole stack: token ids in, logits out, one cache; no mixer entries */
            s->ops = (struct mc_backend_ops){
                .abi_version = MIXCHECK_ABI_VERSION,
                .struct_size = sizeof(struct mc_backend_ops),
                .name = s->name,
                .device = opt->device ? opt->device : "cpu",
                .family = family,
                .dtypes = bits,
                .caps = MC_CAP_STACK | (hidden != NULL && hidden->type == MC_JSON_TRUE ? MC_CAP_STACK_HIDDEN : 0),
                .model_destroy = model_destroy,
                .cache_alloc = cache_alloc,
                .cache_copy = cache_copy,
                .cache_free = cache_free,
                .stack_create = stack_creates[n_slots],
                .stack_forward = stack_forward,
                .stack_cache_export = stack_cache_export,
            };
        } else {
            s->ops = (struct mc_backend_ops){
                .abi_version = MIXCHECK_ABI_VERSION,
                .struct_size = sizeof(struct mc_backend_ops),
                .name = s->name,
                .device = opt->device ? opt->device : "cpu",
                .family = family,
                .dtypes = bits,
                /* chunked: the class honours Options.chunk_size (model_create sends desc->chunk_size) */
                .caps = (packed->type == MC_JSON_TRUE ? MC_CAP_PACKED : 0) |
                        (chunked != NULL && chunked->type == MC_JSON_TRUE ? MC_CAP_CHUNK_SIZE : 0),
                .model_create = creates[n_slots],
                .model_destroy = model_destroy,
                .cache_alloc = cache_alloc,
                .cache_copy = cache_copy,
                .cache_free = cache_free,
                .cache_export = cache_export,
                .cache_import = cache_import,
                .forward = forward,
                .forward_packed = forward_packed,
                .host_map = host_map,
                .host_unmap = host_unmap,
            };
        }
        n_slots++;
        if (mc_registry_add_plugin(reg, &s->ops, s->spec, plugin, err) != MC_ERR_NONE)
            mc_error_prefix(err, "--python-backend %s: ", spec);
    }
    mc_json_free(root);
    for (int k = 0; k < n_specs && err->code == MC_ERR_NONE; k++) {
        int found = 0;
        for (int i = 0; i < n_slots; i++)
            found |= strcmp(slots[i].spec, specs[k]) == 0;
        if (!found)
            mc_error_set(err, MC_ERR_INPUT, "--python-backend %s: no backend classes", specs[k]);
    }
    return err->code;
}

void mc_python_unload(void)
{
    for (int i = 0; i < n_slots; i++) {
        free(slots[i].name);
        free(slots[i].spec);
        free(slots[i].attr);
    }
    n_slots = 0;
    memset(&prov, 0, sizeof prov);
    if (W.active && W.owner == getpid()) {
        close(W.sock); /* the worker reads EOF and exits */
        W.sock = -1;
        worker_status(W.status_fd);
    }
    worker_release(&W);
    int pool_busy = 0;
    for (int i = 0; i < P.n; i++)
        pool_busy |= P.b[i].used;
    if (P.owner == getpid() && !pool_busy) { /* kept while the harness still holds a block of it */
        munmap(P.base, POOL_RESERVE);
        close(P.fd);
        memset(&P, 0, sizeof P);
        P.fd = -1;
    }
    if (Z.pid != 0) {
        close(Z.ctl); /* the zygote reads EOF, kills what is left and exits */
        while (waitpid(Z.pid, NULL, 0) < 0 && errno == EINTR) {
        }
        close(Z.log);
        Z.pid = 0;
        Z.ctl = Z.log = -1;
    }
}
