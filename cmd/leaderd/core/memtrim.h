/* SPDX-License-Identifier: Apache-2.0 */
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
 * long-polls, malformed and oversized requests, at --log-level debug (see
 * docs/design/memory.md, "Thread stacks"). Six times that, rounded up. */
#define LD_THREAD_STACK (128 * 1024)

/* Free heap above this many bytes is handed back to the kernel: at once when
 * that much was freed since the last time, else every LD_MEMTRIM_EVERY_MS. */
#define LD_MEMTRIM_KEEP (64 * 1024)
#define LD_MEMTRIM_EVERY_MS 30000

/* Sets the allocator's limits; call once, first thing in main, before any
 * thread exists. */
void ld_memtrim_setup(void);

/* Start-up, by then, is over: the first read of the Lease, the watch, the
 * acquire attempt and a leader's first renewals, each with its TLS handshake,
 * take a few retry periods (2 s by default). Dropped earlier, the leader maps
 * back almost all of its code (measured: 3.9 MiB VmRSS instead of 3.0). */
#define LD_MEMTRIM_STARTUP_MS 15000

/* Drops the page-table entries of every read-only segment of the program and
 * its libraries (code, constants), so the pages only start-up used (option
 * parsing, kubeconfig, TLS and library set-up) stop counting in VmRSS; the
 * ones still in use are mapped again at their next use, from the page cache.
 * Contents never change: only segments that are never written are touched. */
void ld_memtrim_drop_startup_code(void);

/* Hands free heap pages back to the kernel when more than LD_MEMTRIM_KEEP
 * bytes sit free in the allocator (what a peak leaves behind: freed blocks
 * between live ones, which ordinary frees cannot return). Cheap when there
 * is nothing to give back; meant for the moment the process goes idle, from
 * one thread only (the election loop). The first call LD_MEMTRIM_STARTUP_MS
 * or more after ld_memtrim_setup also drops start-up code (above). */
void ld_memtrim_idle(void);

#endif
