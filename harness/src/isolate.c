/* isolate.c — see isolate.h. */
#include "isolate.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

/* What a child sends back: the whole job result, then a trailer proving it arrived whole. */
struct reply {
    struct mc_check_result res;
    struct mc_error err;
    uint32_t magic;
};
#define REPLY_MAGIC 0x6d697863u

struct child {
    pid_t pid;
    int fd;
    int job;
    double deadline;
    size_t got;
    struct reply *buf;
};

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

static int start(struct child *ch, struct mc_job *job, int index, const struct mc_isolate_options *opt,
                 mc_job_fn fn, void *user, struct mc_error *err)
{
    int fds[2];
    if (pipe(fds) != 0)
        return mc_error_set(err, MC_ERR_INTERNAL, "pipe: %s", strerror(errno));
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return mc_error_set(err, MC_ERR_INTERNAL, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        struct reply *r = calloc(1, sizeof *r);
        if (r == NULL)
            _exit(3);
        fn(job, user);
        r->res = job->res;
        r->err = job->err;
        r->magic = REPLY_MAGIC;
        write_all(fds[1], r, sizeof *r);
        _exit(0);
    }
    close(fds[1]);
    ch->pid = pid;
    ch->fd = fds[0];
    ch->job = index;
    ch->got = 0;
    ch->deadline = opt->timeout_s > 0 ? mc_clock_now_s() + opt->timeout_s : 0;
    return MC_ERR_NONE;
}

/* Reaps a finished child and turns what it sent (or how it died) into the job's result. */
static void finish(struct child *ch, struct mc_job *job, int timed_out, const struct mc_isolate_options *opt)
{
    int status = 0;
    if (timed_out)
        kill(ch->pid, SIGKILL);
    while (waitpid(ch->pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(ch->fd);
    /* identity of the check, in case the child never sent it */
    struct mc_check_result *r = &job->res;
    int whole = ch->got == sizeof *ch->buf && ch->buf->magic == REPLY_MAGIC;
    if (whole && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        *r = ch->buf->res;
        job->err = ch->buf->err;
    } else if (timed_out) {
        snprintf(r->message, sizeof r->message, "timed out after %.0f s (killed)", opt->timeout_s);
        r->status = MC_CHECK_ERROR;
        r->n_tensors = 0;
    } else if (WIFSIGNALED(status)) {
        snprintf(r->message, sizeof r->message, "crashed: signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
        r->status = MC_CHECK_ERROR;
        r->n_tensors = 0;
    } else {
        snprintf(r->message, sizeof r->message, "the check's process exited with status %d before reporting",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        r->status = MC_CHECK_ERROR;
        r->n_tensors = 0;
    }
    ch->pid = 0;
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

enum mc_err_code mc_isolate_run(struct mc_job *jobs, int n, const struct mc_isolate_options *opt, mc_job_fn fn,
                                void *user, struct mc_error *err)
{
    if (!opt->isolate) {
        for (int i = 0; i < n; i++)
            fn(&jobs[i], user);
        return MC_ERR_NONE;
    }
    int slots = opt->jobs < 1 ? 1 : opt->jobs > MC_ISOLATE_MAX_JOBS ? MC_ISOLATE_MAX_JOBS : opt->jobs;
    struct child *kids = calloc((size_t)slots, sizeof *kids);
    struct pollfd *pfd = calloc((size_t)slots, sizeof *pfd);
    int ok = kids != NULL && pfd != NULL;
    for (int k = 0; ok && k < slots; k++) {
        kids[k].buf = malloc(sizeof *kids[k].buf);
        ok = kids[k].buf != NULL;
    }
    if (!ok) {
        mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    int next = 0, running = 0;
    while ((next < n || running > 0) && err->code == MC_ERR_NONE) {
        for (int k = 0; k < slots && next < n && err->code == MC_ERR_NONE; k++) {
            if (kids[k].pid != 0)
                continue;
            preset_identity(&jobs[next]);
            if (start(&kids[k], &jobs[next], next, opt, fn, user, err) == MC_ERR_NONE)
                running++;
            next++;
        }
        if (running == 0)
            break;
        /* wait for output, or the nearest deadline */
        int np = 0, map[MC_ISOLATE_MAX_JOBS];
        double nearest = 0;
        for (int k = 0; k < slots; k++) {
            if (kids[k].pid == 0)
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
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t r = read(ch->fd, (char *)ch->buf + ch->got, sizeof *ch->buf - ch->got);
                if (r > 0) {
                    ch->got += (size_t)r;
                    continue;
                }
                if (r < 0 && errno == EINTR)
                    continue;
                finish(ch, &jobs[ch->job], 0, opt); /* EOF: the child is done, or dead */
                running--;
            } else if (ch->deadline > 0 && mc_clock_now_s() >= ch->deadline) {
                finish(ch, &jobs[ch->job], 1, opt);
                running--;
            }
        }
    }
out:
    for (int k = 0; kids != NULL && k < slots; k++) {
        if (kids[k].pid != 0) { /* only after a harness error */
            kill(kids[k].pid, SIGKILL);
            waitpid(kids[k].pid, NULL, 0);
            close(kids[k].fd);
        }
        free(kids[k].buf);
    }
    free(kids);
    free(pfd);
    return err->code;
}
