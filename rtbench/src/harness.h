/* rtbench - measurement harnesses.
 *
 * Every harness produces an rb_run (see stats.h): warm-up iterations are
 * run and thrown away, then samples are taken in windows of env->window
 * samples. Each window starts with a read of the counters (interrupts of
 * the involved CPUs, involuntary switches of the measured threads) and one
 * unrecorded "re-warm" iteration (so the counter read's cache/TLB footprint
 * does not land in the first sample), and ends with a second counter read.
 * Cross-CPU wake-ups are the exception: the poster reads the interrupt
 * counters immediately before t0 and after the waiter reported t1, so each
 * sample is its own window (their samples are long and separated by long
 * hand-shakes, during which ticks would otherwise be blamed on them).
 */
#ifndef RTBENCH_HARNESS_H
#define RTBENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "stats.h"

struct rb_env {
	int rt;			/* SCHED_FIFO usable */
	int prio;		/* priority of the measuring / highest thread */
	int cpu;		/* measuring CPU, -1: not pinned (unit tests) */
	int other_cpu;		/* second CPU, -1: none */
	const char *no_other_reason;	/* why other_cpu is -1 */
	size_t iterations;
	size_t warmup;
	size_t window;
	int64_t cap_ns;		/* per-benchmark duration cap, 0: none */
	int64_t settle_ns;	/* cross-CPU: wait after the waiter slept */
	int64_t timeout_ns;	/* hand-shake timeout (something is broken) */
	int use_irq;		/* read /proc/interrupts per window */
};

enum rb_status { RB_OK = 0, RB_SKIP = 1, RB_ERROR = 2 };

/* An operation timed alone in one thread: pre (untimed), op (timed),
 * post (untimed). setup returns RB_OK, RB_SKIP (unsupported, reason in
 * err) or RB_ERROR. */
struct rb_single_ops {
	int (*setup)(void **ctx, char *err, size_t errlen);
	void (*teardown)(void *ctx);
	void (*pre)(void *ctx);
	void (*op)(void *ctx);
	void (*post)(void *ctx);
};

/* A wake-up through a primitive: the waiter blocks in wait(); the poster
 * calls post(), which returns t0 = rb_now() taken immediately before the
 * waking call; the waiter takes t1 immediately after wait() returns.
 * arm() runs in the poster before the waiter is let into wait(); after()
 * runs in the waiter after t1. Both untimed. */
struct rb_wake_ops {
	int (*setup)(void **ctx, char *err, size_t errlen);
	void (*teardown)(void *ctx);
	void (*arm)(void *ctx);
	int (*wait)(void *ctx);
	void (*after)(void *ctx);
	int64_t (*post)(void *ctx);
};

int rb_run_single(const struct rb_env *env, const struct rb_single_ops *ops,
		  struct rb_run *run, char *err, size_t errlen);
int rb_run_wake(const struct rb_env *env, const struct rb_wake_ops *ops,
		int cross, struct rb_run *run, char *err, size_t errlen);
int rb_run_ctxsw_yield(const struct rb_env *env, struct rb_run *run,
		       char *err, size_t errlen);
int rb_run_ctxsw_sem(const struct rb_env *env, struct rb_run *run,
		     char *err, size_t errlen);
int rb_run_prio_inversion(const struct rb_env *env, struct rb_run *run,
			  char *err, size_t errlen);

#endif
