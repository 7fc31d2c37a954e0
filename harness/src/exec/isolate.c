/* isolate.c — see isolate.h. */
#define _GNU_SOURCE /* REG_ERR in ucontext_t (x86-64): whether a fault was a read or a write */
#include "exec/isolate.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/dtype.h"
#include "case/casenames.h"
#include "exec/guard.h"
#include "exec/wire.h"

/* What a child sends back: the whole job result, then a trailer proving it arrived whole. A child
 * that faults in a guard fence (guard.h) sends FAULT_MAGIC instead, with the diagnosis in
 * res.message and the signal in res.n_tensors, and then dies of the signal. */
struct reply {
    struct mc_check_result res;
    struct mc_error err;
    uint32_t magic;
};
#define REPLY_MAGIC 0x6d697863u
#define FAULT_MAGIC 0x6d786674u

/* The backend entry point running now (mc_isolate_enter): in a page shared with the parent for an
 * isolated check's child, in own_note otherwise. */
#define NOTE_CALL_LEN 192
struct entry_note {
    volatile sig_atomic_t inside; /* 1 from mc_isolate_enter to mc_isolate_leave */
    char call[NOTE_CALL_LEN];     /* the entry named last ("" before any) */
};
static struct entry_note own_note;
static struct entry_note *note = &own_note;

/* A worker: a child process that runs jobs one after another, their indices sent on `fd` and each
 * result sent back on it, as long as they pass (see mc_isolate_run). */
struct child {
    pid_t pid;       /* 0: no worker in this slot */
    int fd;          /* a socket pair's parent end: job indices out, replies in */
    int job;         /* the job it runs, -1 when idle */
    int served;      /* jobs it finished before this one */
    int rerun_job;   /* a job that failed in a reused worker, to run (or running) again in this fresh
                      * one; -1 when none */
    double deadline;
    size_t got;
    struct reply *buf;
    struct entry_note *note;         /* shared with the worker (mmap MAP_SHARED) */
    struct mc_check_result *earlier; /* a rerun job's first result (allocated on first use) */
    int earlier_served;              /* the checks its worker had run before it */
};

void mc_isolate_enter(const char *call)
{
    struct entry_note *n = note;
    n->inside = 0;
    atomic_signal_fence(memory_order_seq_cst);
    size_t len = strlen(call);
    if (len >= NOTE_CALL_LEN)
        len = NOTE_CALL_LEN - 1;
    memcpy(n->call, call, len);
    n->call[len] = '\0';
    atomic_signal_fence(memory_order_seq_cst);
    n->inside = 1;
    atomic_signal_fence(memory_order_seq_cst);
}

void mc_isolate_leave(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    note->inside = 0;
}

/* " in <entry>", " between backend calls (the last: <entry>)" or "" (none was named) into buf. */
static void note_text(const struct entry_note *n, char *buf, size_t len)
{
    char call[NOTE_CALL_LEN];
    memcpy(call, n->call, sizeof call);
    call[sizeof call - 1] = '\0';
    if (call[0] == '\0')
        buf[0] = '\0';
    else if (n->inside)
        snprintf(buf, len, " in %s", call);
    else
        snprintf(buf, len, " between backend calls (the last: %s)", call);
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

/* ---- crashes: a fence fault becomes a diagnosis, a crash without isolation names what ran ------- */

static int fault_fd = -1;            /* the child's reply pipe, or 2 (stderr) without isolation */
static struct reply *fault_reply;    /* preallocated: nothing is allocated in the handler */
static atomic_flag fault_once = ATOMIC_FLAG_INIT;
static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static const char *const fault_names[] = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"};
#define N_FAULT_SIGNALS 5
static struct sigaction fault_prev[N_FAULT_SIGNALS]; /* as they were */
/* without isolation: "case <id>, scenario <name>, backend <name>, dtype <dtype>" of the job running */
static char crash_running[400];

static int fault_index(int sig)
{
    for (int i = 0; i < N_FAULT_SIGNALS; i++)
        if (fault_signals[i] == sig)
            return i;
    return 0;
}

/* Async-signal-safe appends into a fixed line. */
struct line {
    char text[1024];
    size_t used;
};

static void line_add(struct line *l, const char *s)
{
    while (*s != '\0' && l->used + 1 < sizeof l->text)
        l->text[l->used++] = *s++;
    l->text[l->used] = '\0';
}

static void line_add_int(struct line *l, int v)
{
    char digits[16];
    int n = 0;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0 && n < (int)sizeof digits);
    if (v < 0)
        line_add(l, "-");
    char one[2] = {0, 0};
    while (n > 0) {
        one[0] = digits[--n];
        line_add(l, one);
    }
}

/* Without isolation: "mixcheck: crashed: signal 11 (SIGSEGV) in <entry>; running case ..., dtype f32"
 * on stderr, and the fence's diagnosis (when there is one) on a line of its own. */
static void crash_report(int sig, const char *diagnosis)
{
    static struct line l; /* static: a thread's small stack is not asked for a kilobyte */
    l.used = 0;
    l.text[0] = '\0';
    line_add(&l, "mixcheck: crashed: signal ");
    line_add_int(&l, sig);
    line_add(&l, " (");
    line_add(&l, fault_names[fault_index(sig)]);
    line_add(&l, ")");
    const struct entry_note *n = note;
    char call[NOTE_CALL_LEN];
    memcpy(call, n->call, sizeof call);
    call[sizeof call - 1] = '\0';
    if (call[0] != '\0') {
        line_add(&l, n->inside ? " in " : " between backend calls (the last: ");
        line_add(&l, call);
        if (!n->inside)
            line_add(&l, ")");
    }
    if (crash_running[0] != '\0') {
        line_add(&l, "; running ");
        line_add(&l, crash_running);
    }
    line_add(&l, "\n");
    write_all(2, l.text, l.used);
    if (diagnosis != NULL) {
        write_all(2, "mixcheck: crashed: ", 19);
        write_all(2, diagnosis, strlen(diagnosis));
        write_all(2, "\n", 1);
    }
}

static void on_fault(int sig, siginfo_t *si, void *ucv)
{
    int saved = errno;
    enum mc_guard_access access = MC_GUARD_ACCESS_UNKNOWN;
#if defined(__x86_64__) && defined(REG_ERR)
    /* the page-fault error code: bit 1 set for a write */
    const ucontext_t *uc = ucv;
    access = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? MC_GUARD_ACCESS_WRITE : MC_GUARD_ACCESS_READ;
#else
    (void)ucv;
#endif
    if (fault_reply != NULL && !atomic_flag_test_and_set(&fault_once)) {
        struct mc_check_result *r = &fault_reply->res;
        /* si_code > 0: raised by the hardware, so si_addr is the faulting address (not kill/raise) */
        int fenced = (sig == SIGSEGV || sig == SIGBUS) && si->si_code > 0 &&
                     mc_guard_describe_fault(si->si_addr, access, r->message, sizeof r->message);
        if (fault_fd == 2) {
            crash_report(sig, fenced ? r->message : NULL);
        } else if (fenced) {
            r->n_tensors = sig;
            fault_reply->magic = FAULT_MAGIC;
            write_all(fault_fd, fault_reply, sizeof *fault_reply);
        }
    }
    /* back to what handled the signal before (the default, or ASan's): a fault re-executes and
     * reaches it with its own siginfo; a sent signal (kill, raise, abort) is sent again */
    sigaction(sig, &fault_prev[fault_index(sig)], NULL);
    errno = saved;
    if (si->si_code <= 0)
        raise(sig);
}

/* Installs on_fault: a child sends a fence diagnosis as a reply on fd; with fd 2 (no isolation) every
 * crash is reported on stderr. */
static void fault_handler_install(int fd, struct reply *reply)
{
    fault_fd = fd;
    fault_reply = reply;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_FAULT_SIGNALS; i++)
        sigaction(fault_signals[i], &sa, &fault_prev[i]);
}

static void fault_handler_remove(void)
{
    for (int i = 0; i < N_FAULT_SIGNALS; i++)
        sigaction(fault_signals[i], &fault_prev[i], NULL);
    fault_reply = NULL;
}

/* Fills the identity fields a dead child could not send. */
static void preset_identity(struct mc_job *job)
{
    struct mc_check_result *r = &job->res;
    memset(r, 0, sizeof *r);
    snprintf(r->case_id, sizeof r->case_id, "%s", job->ctx.c->id);
    snprintf(r->case_path, sizeof r->case_path, "%s", job->ctx.c->path);
    r->family = job->ctx.c->family;
    r->scenario = job->ctx.spec->kind;
    r->backend = job->ctx.ops->name;
    r->device = job->ctx.ops->device;
    r->dtype = job->ctx.dtype;
}

/* A check that leaves its worker fit for the next one: it passed, or did not apply, and the harness
 * found no input problem in it. Anything else retires the worker. */
static int clean(const struct mc_job *job)
{
    enum mc_check_status st = job->res.status;
    return job->err.code == MC_ERR_NONE &&
           (st == MC_CHECK_PASS || st == MC_CHECK_UNSUPPORTED || st == MC_CHECK_SKIPPED);
}

/* Jobs one worker runs at most before it is replaced (what a backend leaks stays bounded). */
#define WORKER_JOBS 256

/* The worker's life: wait for a job index, run the job, send the reply; until the parent closes its
 * end (or kills it). Its copy of `jobs` is the parent's as it was when the worker was forked. */
static void worker_main(int fd, struct entry_note *shared, struct mc_job *jobs, int n, mc_job_fn fn, void *user)
{
    struct reply *r = calloc(1, sizeof *r);
    if (r == NULL)
        _exit(3);
    note = shared;
    fault_handler_install(fd, r);
    int32_t idx;
    while (mc_wire_recv_all(fd, &idx, sizeof idx) == 0 && idx >= 0 && idx < n) {
        struct mc_job *job = &jobs[idx];
        preset_identity(job);
        memset(&job->err, 0, sizeof job->err);
        fn(job, user);
        r->res = job->res;
        r->err = job->err;
        r->magic = REPLY_MAGIC;
        write_all(fd, r, sizeof *r);
    }
    mc_guard_trim();
    _exit(0);
}

/* Forks a fresh worker into slot k. */
static int spawn(struct child *kids, int slots, int k, struct mc_job *jobs, int n, mc_job_fn fn, void *user,
                 struct mc_error *err)
{
    struct child *ch = &kids[k];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return mc_error_set(err, MC_ERR_INTERNAL, "socketpair: %s", strerror(errno));
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return mc_error_set(err, MC_ERR_INTERNAL, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(sv[0]);
        /* the other workers' parent ends: held open here, a worker the parent retires would never
         * see its end of file */
        for (int o = 0; o < slots; o++)
            if (o != k && kids[o].pid != 0)
                close(kids[o].fd);
        worker_main(sv[1], ch->note, jobs, n, fn, user);
    }
    close(sv[1]);
    ch->pid = pid;
    ch->fd = sv[0];
    ch->job = -1;
    ch->served = 0;
    ch->got = 0;
    return MC_ERR_NONE;
}

/* Ends slot k's worker (its reply, if any, is in). */
static void retire(struct child *ch)
{
    if (ch->pid == 0)
        return;
    kill(ch->pid, SIGKILL);
    close(ch->fd);
    while (waitpid(ch->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    ch->pid = 0;
    ch->job = -1;
}

/* Hands job j to slot k's worker. 0 when sent; -1 when the worker was gone (the slot is then empty). */
/* (The job's result is written when its reply is in, or by died(): writing it here too would copy, page by
 * page, a result the parent shares with its workers since the fork.) */
static int assign(struct child *ch, int j, const struct mc_isolate_options *opt)
{
    memset(ch->note, 0, sizeof *ch->note);
    int32_t idx = j;
    if (mc_wire_send_all(ch->fd, &idx, sizeof idx) != 0) {
        retire(ch);
        return -1;
    }
    ch->job = j;
    ch->got = 0;
    ch->deadline = opt->timeout_s > 0 ? mc_clock_now_s() + opt->timeout_s : 0;
    return 0;
}

/* Slot k's worker died (or ran out of time) during its job: the job's result says how, from what the
 * worker sent before (a fence's diagnosis) and its exit status. */
static void died(struct child *ch, struct mc_job *job, int timed_out, const struct mc_isolate_options *opt)
{
    int status = 0;
    if (timed_out)
        kill(ch->pid, SIGKILL);
    while (waitpid(ch->pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(ch->fd);
    ch->pid = 0;
    ch->job = -1;
    preset_identity(job);
    struct mc_check_result *r = &job->res;
    int all = ch->got == sizeof *ch->buf;
    char where[NOTE_CALL_LEN + 64];
    note_text(ch->note, where, sizeof where);
    if (timed_out) {
        snprintf(r->message, sizeof r->message, "timed out after %.0f s (killed)%s", opt->timeout_s, where);
    } else if (all && ch->buf->magic == FAULT_MAGIC) {
        /* a fault in a fence: the worker's handler named the buffer; it then died of the signal, or
         * a sanitizer's handler (reached after ours) ended it */
        int sig = ch->buf->res.n_tensors;
        snprintf(r->message, sizeof r->message, "crashed: signal %d (%s): %.900s", sig, strsignal(sig),
                 ch->buf->res.message);
    } else if (WIFSIGNALED(status)) {
        snprintf(r->message, sizeof r->message, "crashed: signal %d (%s)%s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), where);
    } else {
        snprintf(r->message, sizeof r->message, "the check's process exited with status %d before reporting%s%s",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, where[0] ? "," : "", where);
    }
    r->status = MC_CHECK_ERROR;
    r->n_tensors = 0;
}

/* A job that did not pass in a worker that had run others first runs again in a fresh one (a crash
 * or failure may be what an earlier check left in the process). Its first result is kept. */
static int plan_rerun(struct child *ch, const struct mc_job *job, int j, int served)
{
    if (served == 0)
        return 0;
    if (ch->earlier == NULL && (ch->earlier = malloc(sizeof *ch->earlier)) == NULL)
        return 0; /* no room to keep it: the first result stands */
    *ch->earlier = job->res;
    ch->earlier_served = served;
    ch->rerun_job = j;
    return 1;
}

/* The rerun's result is in: when it passed alone, the first result stands, saying so (a backend whose
 * result depends on the checks run before it in the same process has a bug of its own). */
static void settle_rerun(struct child *ch, struct mc_job *job)
{
    ch->rerun_job = -1;
    if (!clean(job))
        return;
    struct mc_check_result first = *ch->earlier;
    char msg[sizeof first.message];
    snprintf(msg, sizeof msg,
             "fails after %d other checks ran in the same process and passes in a fresh one (the backend "
             "keeps state across calls?)%s%.900s",
             ch->earlier_served, first.message[0] ? ": " : "", first.message);
    memcpy(first.message, msg, sizeof first.message);
    job->res = first;
}

enum mc_err_code mc_isolate_run(struct mc_job *jobs, int n, const struct mc_isolate_options *opt, mc_job_fn fn,
                                void *user, struct mc_error *err)
{
    mc_guard_mode(); /* read MIXCHECK_GUARD_MODE here, not in every child (one warning at most) */
    if (!opt->isolate) {
        /* a fence fault still ends the process; the handler prints which buffer first */
        static struct reply diag;
        fault_handler_install(2, &diag);
        for (int i = 0; i < n; i++) {
            const struct mc_scenario_ctx *c = &jobs[i].ctx;
            snprintf(crash_running, sizeof crash_running, "case %s, scenario %s, backend %s, dtype %s", c->c->id,
                     mc_scenario_name(c->spec->kind), c->ops->name, mc_dtype_name(c->dtype));
            fn(&jobs[i], user);
        }
        crash_running[0] = '\0';
        fault_handler_remove();
        mc_guard_trim();
        return MC_ERR_NONE;
    }
    int slots = opt->jobs < 1 ? 1 : opt->jobs > MC_ISOLATE_MAX_JOBS ? MC_ISOLATE_MAX_JOBS : opt->jobs;
    if (slots > n)
        slots = n > 0 ? n : 1;
    struct child *kids = calloc((size_t)slots, sizeof *kids);
    struct pollfd *pfd = calloc((size_t)slots, sizeof *pfd);
    int ok = kids != NULL && pfd != NULL;
    for (int k = 0; ok && k < slots; k++) {
        kids[k].job = kids[k].rerun_job = -1;
        kids[k].buf = malloc(sizeof *kids[k].buf);
        void *page = mmap(NULL, sizeof *kids[k].note, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        kids[k].note = page == MAP_FAILED ? NULL : page;
        ok = kids[k].buf != NULL && kids[k].note != NULL;
    }
    if (!ok) {
        mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    int next = 0, running = 0, reruns = 0; /* reruns: planned, not yet handed out */
    while ((next < n || running > 0 || reruns > 0) && err->code == MC_ERR_NONE) {
        for (int k = 0; k < slots && err->code == MC_ERR_NONE; k++) {
            struct child *ch = &kids[k];
            int rerun = ch->rerun_job >= 0;
            if (ch->job >= 0 || (!rerun && next >= n))
                continue;
            int j = rerun ? ch->rerun_job : next;
            /* a worker found gone between jobs is replaced once; a fresh one that cannot take a job is
             * a harness error */
            for (int tries = 0; ch->job < 0 && tries < 2 && err->code == MC_ERR_NONE; tries++)
                if (ch->pid != 0 || spawn(kids, slots, k, jobs, n, fn, user, err) == MC_ERR_NONE)
                    assign(ch, j, opt);
            if (ch->job < 0) {
                if (err->code == MC_ERR_NONE)
                    mc_error_set(err, MC_ERR_INTERNAL, "a check's worker process could not be started");
                break;
            }
            if (rerun)
                reruns--;
            else
                next++;
            running++;
        }
        if (running == 0 || err->code != MC_ERR_NONE)
            break;
        /* wait for output, or the nearest deadline */
        int np = 0, map[MC_ISOLATE_MAX_JOBS];
        double nearest = 0;
        for (int k = 0; k < slots; k++) {
            if (kids[k].job < 0)
                continue;
            pfd[np].fd = kids[k].fd;
            pfd[np].events = POLLIN;
            map[np] = k;
            np++;
            if (kids[k].deadline > 0 && (nearest == 0 || kids[k].deadline < nearest))
                nearest = kids[k].deadline;
        }
        int wait_ms = -1;
        if (nearest > 0) {
            double left = nearest - mc_clock_now_s();
            wait_ms = left <= 0 ? 0 : (int)(left * 1000.0) + 1;
        }
        if (poll(pfd, (nfds_t)np, wait_ms) < 0 && errno != EINTR) {
            mc_error_set(err, MC_ERR_INTERNAL, "poll: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < np; i++) {
            struct child *ch = &kids[map[i]];
            int j = ch->job, served = ch->served, outcome = 0; /* 1: a whole reply, 2: died, 3: timed out */
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t r = read(ch->fd, (char *)ch->buf + ch->got, sizeof *ch->buf - ch->got);
                if (r > 0) {
                    ch->got += (size_t)r;
                    if (ch->got == sizeof *ch->buf && ch->buf->magic == REPLY_MAGIC)
                        outcome = 1;
                } else if (!(r < 0 && errno == EINTR)) {
                    outcome = 2; /* end of file: the worker is dead */
                }
            } else if (ch->deadline > 0 && mc_clock_now_s() >= ch->deadline) {
                outcome = 3;
            }
            if (outcome == 0)
                continue;
            running--;
            struct mc_job *job = &jobs[j];
            if (outcome == 1) {
                job->res = ch->buf->res;
                job->err = ch->buf->err;
                ch->job = -1;
                ch->served++;
            } else {
                died(ch, job, outcome == 3, opt);
            }
            if (ch->rerun_job >= 0) {
                retire(ch);
                settle_rerun(ch, job);
            } else if (!clean(job)) {
                retire(ch);
                if (outcome != 3)
                    reruns += plan_rerun(ch, job, j, served);
            } else if (ch->served >= WORKER_JOBS) {
                retire(ch);
            }
        }
    }
out:
    for (int k = 0; kids != NULL && k < slots; k++) {
        retire(&kids[k]);
        free(kids[k].buf);
        free(kids[k].earlier);
        if (kids[k].note != NULL)
            munmap(kids[k].note, sizeof *kids[k].note);
    }
    free(kids);
    free(pfd);
    return err->code;
}

void *mc_isolate_private_resize(void *p, size_t old_bytes, size_t new_bytes)
{
    void *v = p == NULL ? mmap(NULL, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                        : mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
    if (v == MAP_FAILED)
        return NULL;
    (void)madvise(v, new_bytes, MADV_DONTFORK); /* advice: without it the workers only cost more to fork */
    return v;
}

void mc_isolate_private_free(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes);
}
