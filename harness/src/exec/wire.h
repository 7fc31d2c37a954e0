/*
 * wire.h — whole-buffer transfers on a socket, for the processes the exec room talks to (isolate.c's
 * check workers, pybackend.c's Python workers): a short read or write is continued, EINTR retried, and
 * a send to a peer that is gone fails with -1 instead of raising SIGPIPE.
 */
#ifndef MC_WIRE_H
#define MC_WIRE_H

#include <stddef.h>

/* Sends all n bytes: 0, or -1 when the peer is gone or an error ended it. */
int mc_wire_send_all(int fd, const void *p, size_t n);
/* Receives exactly n bytes: 0, or -1 at the end of the stream (the peer closed) or on an error. */
int mc_wire_recv_all(int fd, void *p, size_t n);

#endif
