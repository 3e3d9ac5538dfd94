/*
 * memtrim: the allocator settings that keep the daemon's heap at what its
 * steady state needs, and the give-back after a peak. A sidecar is paid once
 * per pod, so a megabyte kept after one large Lease or a burst of HTTP
 * connections is a megabyte on every pod, for the life of the pod.
 */
#ifndef LEADERD_MEMTRIM_H
#define LEADERD_MEMTRIM_H

/* The stack of every thread the daemon starts (the HTTP server's, the
 * notifier). The deepest use measured is 20 KiB of which part is the thread's
 * own descriptor and TLS: the resident pages of each thread's stack mapping
 * (/proc/PID/smaps) after wrk on /leader and /metrics, 20 /watch streams,
 * long-polls, malformed and oversized requests, at --log-level debug
 * (tools/footprint.py --stacks). Six times that, rounded up. */
#define LD_THREAD_STACK (128 * 1024)

/* Free heap above this many bytes is handed back to the kernel. */
#define LD_MEMTRIM_KEEP (256 * 1024)

/* Sets the allocator's limits; call once, first thing in main, before any
 * thread exists. */
void ld_memtrim_setup(void);

/* Hands free heap pages back to the kernel when more than LD_MEMTRIM_KEEP
 * bytes sit free in the allocator (what a peak leaves behind: freed blocks
 * between live ones, which ordinary frees cannot return). Cheap when there
 * is nothing to give back; meant for the moment the process goes idle. Safe
 * from any thread. */
void ld_memtrim_idle(void);

#endif
