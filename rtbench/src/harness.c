/* rtbench - measurement harnesses (see harness.h). */
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysutil.h"

#define RB_STACK_PREFAULT (64 * 1024)
/* RT throttling (sched_rt_runtime_us, default 950000 of 1000000) would
 * stall a SCHED_FIFO hog after 0.95 s; rest 10 ms every 100 ms of work. */
#define RB_REST_EVERY_NS (100 * 1000000LL)
#define RB_REST_NS (10 * 1000000LL)
#define RB_PI_SPIN_NS (5 * 1000000LL)	/* medium thread's spin bound */
#define RB_CACHELINE 128

static void set_err(char *err, size_t errlen, const char *fmt, const char *what,
		    int e)
{
	if (err && errlen)
		snprintf(err, errlen, fmt, what, strerror(e));
}

static int prio_or(const struct rb_env *env, int delta)
{
	return env->rt ? env->prio + delta : 0;
}

static struct rb_sched mk_sched(const struct rb_env *env, int delta, int cpu)
{
	struct rb_sched s = {
		.policy = env->rt ? SCHED_FIFO : SCHED_OTHER,
		.prio = prio_or(env, delta),
		.cpu = cpu,
	};
	return s;
}

/* ---- counters --------------------------------------------------------- */

struct counters {
	struct rb_irq irq;
	int ok;
	int cpus[2];
	int n;
};

static void counters_open(struct counters *c, const struct rb_env *env,
			  int cross)
{
	uint64_t t;

	memset(c, 0, sizeof(*c));
	c->irq.fd = -1;
	if (!env->use_irq || env->cpu < 0)
		return;
	c->cpus[c->n++] = env->cpu;
	if (cross && env->other_cpu >= 0)
		c->cpus[c->n++] = env->other_cpu;
	if (rb_irq_open(&c->irq) == 0)
		c->ok = rb_irq_read(&c->irq, c->cpus, c->n, &t) == 0;
}

static uint64_t counters_irq(struct counters *c)
{
	uint64_t t = 0;

	if (c->ok && rb_irq_read(&c->irq, c->cpus, c->n, &t) != 0) {
		c->ok = 0;
		t = 0;
	}
	return t;
}

static void counters_close(struct counters *c)
{
	if (c->irq.buf)
		rb_irq_close(&c->irq);
}

/* ---- generic driver ----------------------------------------------------- */

struct driver {
	int (*iter)(void *st, int64_t *raw, uint8_t *reason);
	uint64_t (*csw)(void *st);		/* cumulative, may be NULL */
	void (*rest)(void *st, int resting);	/* may be NULL */
	void *st;
	/* per_sample: iter() brackets its own timed region with interrupt
	 * counter reads and leaves the delta in *sample_irq; every sample is
	 * then its own window (no re-warm iteration needed). */
	int per_sample;
	uint64_t *sample_irq;
};

static int drive(const struct rb_env *env, struct counters *c,
		 const struct driver *d, struct rb_run *run)
{
	int64_t raw, start, last_rest;
	uint8_t reason;
	size_t i;

	for (i = 0; i < env->warmup; i++)
		if (d->iter(d->st, &raw, &reason))
			return -1;
	start = last_rest = rb_now();
	while (run->n < env->iterations) {
		int64_t now = rb_now();
		uint64_t irq0, irq1, csw0, csw1;
		size_t k;

		if (env->cap_ns > 0 && now - start >= env->cap_ns)
			break;
		if (now - last_rest >= RB_REST_EVERY_NS) {
			if (d->rest)
				d->rest(d->st, 1);
			rb_sleep_ns(RB_REST_NS);
			if (d->rest)
				d->rest(d->st, 0);
			last_rest = rb_now();
		}
		if (d->per_sample) {
			csw0 = d->csw ? d->csw(d->st) : 0;
			for (k = 0; k < env->window && run->n < env->iterations;
			     k++) {
				if (d->iter(d->st, &raw, &reason))
					return -1;
				rb_run_add(run, raw, reason);
				csw1 = d->csw ? d->csw(d->st) : 0;
				if (rb_run_close_window(run, *d->sample_irq,
							csw1 > csw0 ?
							csw1 - csw0 : 0))
					return -1;
				csw0 = csw1;
			}
			continue;
		}
		irq0 = counters_irq(c);
		csw0 = d->csw ? d->csw(d->st) : 0;
		if (d->iter(d->st, &raw, &reason))	/* re-warm */
			return -1;
		for (k = 0; k < env->window && run->n < env->iterations; k++) {
			if (d->iter(d->st, &raw, &reason))
				return -1;
			rb_run_add(run, raw, reason);
		}
		csw1 = d->csw ? d->csw(d->st) : 0;
		irq1 = counters_irq(c);
		if (rb_run_close_window(run, irq1 > irq0 ? irq1 - irq0 : 0,
					csw1 > csw0 ? csw1 - csw0 : 0))
			return -1;
	}
	return 0;
}

/* wait until *v >= want; yield instead of pausing when sharing a CPU */
static int spin_until(atomic_long *v, long want, int yield, int64_t timeout)
{
	int64_t deadline = rb_now() + timeout;
	unsigned n = 0;

	while (atomic_load_explicit(v, memory_order_acquire) < want) {
		if (yield)
			sched_yield();
		else
			rb_cpu_relax();
		if ((++n & 255) == 0 && rb_now() > deadline)
			return -1;
	}
	return 0;
}

static int sem_wait_nointr(sem_t *s)
{
	int r;

	while ((r = sem_wait(s)) != 0 && errno == EINTR)
		;
	return r;
}

/* ---- single-thread operations ------------------------------------------ */

struct single_st {
	const struct rb_single_ops *ops;
	void *ctx;
	int cpu;
};

static int single_iter(void *p, int64_t *raw, uint8_t *reason)
{
	struct single_st *st = p;
	const struct rb_single_ops *ops = st->ops;
	int64_t t0, t1;
	int c0, c1;

	if (ops->pre)
		ops->pre(st->ctx);
	c0 = sched_getcpu();
	rb_barrier();
	t0 = rb_now();
	rb_serialize();
	ops->op(st->ctx);
	rb_serialize();
	t1 = rb_now();
	rb_barrier();
	c1 = sched_getcpu();
	if (ops->post)
		ops->post(st->ctx);
	*raw = t1 - t0;
	*reason = (c0 != c1 || (st->cpu >= 0 && c0 != st->cpu)) ?
		  RB_MIGRATION : RB_KEPT;
	return 0;
}

static uint64_t self_nivcsw(void *p)
{
	long niv;

	(void)p;
	rb_thread_csw(&niv, NULL);
	return (uint64_t)niv;
}

int rb_run_single(const struct rb_env *env, const struct rb_single_ops *ops,
		  struct rb_run *run, char *err, size_t errlen)
{
	struct rb_sched s = mk_sched(env, 0, env->cpu);
	struct single_st st = { .ops = ops, .ctx = NULL, .cpu = env->cpu };
	struct driver d = { single_iter, self_nivcsw, NULL, &st, 0, NULL };
	struct counters c;
	int r, e;

	e = rb_sched_self(&s);
	if (e) {
		set_err(err, errlen, "%s: %s", "setting scheduling/affinity", e);
		return RB_ERROR;
	}
	if (ops->setup) {
		r = ops->setup(&st.ctx, err, errlen);
		if (r != RB_OK)
			return r;
	}
	rb_prefault_stack(RB_STACK_PREFAULT);
	counters_open(&c, env, 0);
	r = drive(env, &c, &d, run) ? RB_ERROR : RB_OK;
	if (r != RB_OK)
		snprintf(err, errlen, "out of memory");
	counters_close(&c);
	if (ops->teardown)
		ops->teardown(st.ctx);
	return r;
}

/* ---- wake-up through a primitive -------------------------------------- */

struct wake_mbox {
	int64_t t1;
	int cpu0, cpu1;
	int slept;
	int err;
	long nivcsw;
};

struct wake_sh {
	const struct rb_wake_ops *ops;
	void *ctx;
	const struct rb_env *env;
	int cross;
	int poster_cpu;
	int spin_yield;		/* poster and waiter share a CPU */
	int check_state;	/* poll the waiter's /proc state before post */
	struct rb_taskstat ts;
	sem_t gate;
	pid_t waiter_tid;
	atomic_int tid_published;
	atomic_int stop;
	long iter;
	int status;
	char *err;
	size_t errlen;
	struct counters *ctr;	/* cross-CPU: read around each sample */
	uint64_t sample_irq;
	_Alignas(RB_CACHELINE) atomic_long ready;
	_Alignas(RB_CACHELINE) atomic_long done;
	_Alignas(RB_CACHELINE) struct wake_mbox mbox;
	_Alignas(RB_CACHELINE) struct rb_run *run;
};

static void *wake_waiter(void *p)
{
	struct wake_sh *sh = p;
	long i = 0;

	rb_prefault_stack(RB_STACK_PREFAULT);
	sh->waiter_tid = rb_gettid();
	atomic_store(&sh->tid_published, 1);
	for (;;) {
		long nv0, nv1, niv1;
		int64_t t1;
		int c0, c1, e;

		sem_wait_nointr(&sh->gate);
		if (atomic_load(&sh->stop))
			break;
		i++;
		c0 = sched_getcpu();
		rb_thread_csw(NULL, &nv0);
		atomic_store_explicit(&sh->ready, i, memory_order_release);
		e = sh->ops->wait(sh->ctx);
		rb_barrier();
		t1 = rb_now();
		rb_barrier();
		c1 = sched_getcpu();
		if (sh->ops->after)
			sh->ops->after(sh->ctx);
		rb_thread_csw(&niv1, &nv1);
		sh->mbox.t1 = t1;
		sh->mbox.cpu0 = c0;
		sh->mbox.cpu1 = c1;
		sh->mbox.slept = nv1 != nv0;
		sh->mbox.err = e;
		sh->mbox.nivcsw = niv1;
		atomic_store_explicit(&sh->done, i, memory_order_release);
	}
	return NULL;
}

static int wake_iter(void *p, int64_t *raw, uint8_t *reason)
{
	struct wake_sh *sh = p;
	const struct rb_env *env = sh->env;
	long i = ++sh->iter;
	int64_t t0;
	uint64_t irq0, irq1;
	int c0, c1, mig;

	if (sh->ops->arm)
		sh->ops->arm(sh->ctx);
	sem_post(&sh->gate);
	if (spin_until(&sh->ready, i, sh->spin_yield, env->timeout_ns)) {
		snprintf(sh->err, sh->errlen,
			 "timeout: waiter did not reach the wait");
		return -1;
	}
	if (sh->check_state) {
		int64_t deadline = rb_now() + env->timeout_ns;

		for (;;) {
			char s = rb_taskstat_state(&sh->ts);

			if (s == 'S' || s == 'D' || s == 0)
				break;	/* 0: /proc unreadable, rely on settle */
			if (rb_now() > deadline) {
				snprintf(sh->err, sh->errlen,
					 "timeout: waiter never slept");
				return -1;
			}
			if (sh->spin_yield)
				sched_yield();
			else
				rb_cpu_relax();
		}
		if (sh->cross && env->settle_ns > 0)
			rb_spin_ns(env->settle_ns);
	}
	irq0 = sh->cross ? counters_irq(sh->ctr) : 0;
	c0 = sched_getcpu();
	t0 = sh->ops->post(sh->ctx);
	c1 = sched_getcpu();
	if (spin_until(&sh->done, i, sh->spin_yield, env->timeout_ns)) {
		snprintf(sh->err, sh->errlen,
			 "timeout: waiter was not woken by the post");
		return -1;
	}
	if (sh->cross) {
		irq1 = counters_irq(sh->ctr);
		sh->sample_irq = irq1 > irq0 ? irq1 - irq0 : 0;
	}
	if (sh->mbox.err) {
		snprintf(sh->err, sh->errlen, "wait failed: %s",
			 strerror(sh->mbox.err));
		return -1;
	}
	*raw = sh->mbox.t1 - t0;
	mig = c0 != c1 || sh->mbox.cpu0 != sh->mbox.cpu1 ||
	      (sh->poster_cpu >= 0 && c0 != sh->poster_cpu) ||
	      (env->cpu >= 0 && sh->mbox.cpu0 != env->cpu);
	*reason = mig ? RB_MIGRATION :
		  !sh->mbox.slept ? RB_NOT_BLOCKED : RB_KEPT;
	return 0;
}

static uint64_t wake_csw(void *p)
{
	struct wake_sh *sh = p;
	uint64_t v = (uint64_t)sh->mbox.nivcsw;	/* waiter: must not be */

	if (sh->cross)		/* poster too, when it is not the preemptee */
		v += self_nivcsw(NULL);
	return v;
}

static void *wake_poster(void *p)
{
	struct wake_sh *sh = p;
	struct driver d = { wake_iter, wake_csw, NULL, sh, sh->cross,
			    &sh->sample_irq };
	struct counters c;
	int64_t deadline = rb_now() + sh->env->timeout_ns;

	rb_prefault_stack(RB_STACK_PREFAULT);
	while (!atomic_load(&sh->tid_published)) {
		if (rb_now() > deadline) {
			snprintf(sh->err, sh->errlen, "waiter did not start");
			sh->status = RB_ERROR;
			return NULL;
		}
		sched_yield();
	}
	sh->ts.fd = -1;
	if (sh->check_state)
		rb_taskstat_open(&sh->ts, sh->waiter_tid);
	counters_open(&c, sh->env, sh->cross);
	sh->ctr = &c;
	sh->status = drive(sh->env, &c, &d, sh->run) ? RB_ERROR : RB_OK;
	counters_close(&c);
	rb_taskstat_close(&sh->ts);
	return NULL;
}

/* Stop the waiter; on a failed hand-shake try to unblock it first.
 * Returns 0 if it was joined (ctx may be torn down). */
static int wake_stop(struct wake_sh *sh, pthread_t waiter)
{
	long it = sh->iter;

	atomic_store(&sh->stop, 1);
	if (sh->status != RB_OK &&
	    atomic_load(&sh->ready) == it && atomic_load(&sh->done) < it)
		sh->ops->post(sh->ctx);
	sem_post(&sh->gate);
	if (rb_thread_join_timeout(waiter, 2 * RB_NSEC_PER_SEC) != 0) {
		pthread_detach(waiter);
		return -1;
	}
	return 0;
}

int rb_run_wake(const struct rb_env *env, const struct rb_wake_ops *ops,
		int cross, struct rb_run *run, char *err, size_t errlen)
{
	struct wake_sh *sh;
	pthread_t waiter, poster;
	struct rb_sched ws, ps;
	int e, r;

	if (cross && env->other_cpu < 0) {
		snprintf(err, errlen, "%s", env->no_other_reason ?
			 env->no_other_reason : "no other CPU available");
		return RB_SKIP;
	}
	sh = aligned_alloc(RB_CACHELINE,
			   (sizeof(*sh) + RB_CACHELINE - 1) /
			   RB_CACHELINE * RB_CACHELINE);
	if (!sh) {
		snprintf(err, errlen, "out of memory");
		return RB_ERROR;
	}
	memset(sh, 0, sizeof(*sh));
	sh->ops = ops;
	sh->env = env;
	sh->cross = cross;
	sh->poster_cpu = cross ? env->other_cpu : env->cpu;
	sh->spin_yield = !cross;
	/* same CPU under SCHED_FIFO: the waiter has the higher priority, so
	 * the poster only runs once the waiter is blocked. */
	sh->check_state = cross || !env->rt;
	sh->err = err;
	sh->errlen = errlen;
	sh->run = run;
	sh->ts.fd = -1;
	if (sem_init(&sh->gate, 0, 0)) {
		snprintf(err, errlen, "sem_init: %s", strerror(errno));
		free(sh);
		return RB_ERROR;
	}
	r = ops->setup ? ops->setup(&sh->ctx, err, errlen) : RB_OK;
	if (r != RB_OK) {
		sem_destroy(&sh->gate);
		free(sh);
		return r;
	}
	ws = mk_sched(env, 0, env->cpu);
	ps = mk_sched(env, -10, sh->poster_cpu);
	e = rb_thread_create(&waiter, &ws, wake_waiter, sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating waiter thread", e);
		if (ops->teardown)
			ops->teardown(sh->ctx);
		sem_destroy(&sh->gate);
		free(sh);
		return RB_ERROR;
	}
	e = rb_thread_create(&poster, &ps, wake_poster, sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating poster thread", e);
		sh->status = RB_ERROR;
	} else {
		pthread_join(poster, NULL);
	}
	r = sh->status;
	if (r == RB_ERROR && !err[0])
		snprintf(err, errlen, "out of memory");
	if (wake_stop(sh, waiter) != 0) {
		/* waiter is stuck: leak its state rather than free under it */
		if (r == RB_OK)
			snprintf(err, errlen, "waiter could not be stopped");
		return RB_ERROR;
	}
	if (ops->teardown)
		ops->teardown(sh->ctx);
	sem_destroy(&sh->gate);
	free(sh);
	return r;
}

/* ---- context switch: sched_yield ping-pong ------------------------------ */

struct yield_sh {
	const struct rb_env *env;
	atomic_long cnt;
	atomic_int stop;
	atomic_int park;
	sem_t unpark;
	struct rb_run *run;
	int status;
	char *err;
	size_t errlen;
};

static void *yield_partner(void *p)
{
	struct yield_sh *sh = p;

	rb_prefault_stack(RB_STACK_PREFAULT);
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		if (atomic_load_explicit(&sh->park, memory_order_relaxed)) {
			sem_wait_nointr(&sh->unpark);
			continue;
		}
		atomic_store_explicit(&sh->cnt,
				      atomic_load_explicit(&sh->cnt,
							   memory_order_relaxed) + 1,
				      memory_order_relaxed);
		sched_yield();
	}
	return NULL;
}

static int yield_iter(void *p, int64_t *raw, uint8_t *reason)
{
	struct yield_sh *sh = p;
	long n0;
	int64_t t0, t1;
	int c0, c1;

	c0 = sched_getcpu();
	n0 = atomic_load_explicit(&sh->cnt, memory_order_relaxed);
	rb_barrier();
	t0 = rb_now();
	rb_barrier();
	sched_yield();
	rb_barrier();
	t1 = rb_now();
	rb_barrier();
	c1 = sched_getcpu();
	*raw = t1 - t0;
	*reason = (c0 != c1 || c0 != sh->env->cpu) ? RB_MIGRATION :
		  atomic_load_explicit(&sh->cnt, memory_order_relaxed) == n0 ?
		  RB_NO_SWITCH : RB_KEPT;
	return 0;
}

static void yield_rest(void *p, int resting)
{
	struct yield_sh *sh = p;

	if (resting) {
		atomic_store(&sh->park, 1);
		sched_yield();	/* let the partner see it and block */
	} else {
		atomic_store(&sh->park, 0);
		sem_post(&sh->unpark);
	}
}

static void *yield_main(void *p)
{
	struct yield_sh *sh = p;
	/* sched_yield counts as an involuntary switch: no csw counter here */
	struct driver d = { yield_iter, NULL, yield_rest, sh, 0, NULL };
	struct counters c;

	rb_prefault_stack(RB_STACK_PREFAULT);
	counters_open(&c, sh->env, 0);
	sh->status = drive(sh->env, &c, &d, sh->run) ? RB_ERROR : RB_OK;
	counters_close(&c);
	atomic_store(&sh->stop, 1);
	atomic_store(&sh->park, 0);
	sem_post(&sh->unpark);
	return NULL;
}

int rb_run_ctxsw_yield(const struct rb_env *env, struct rb_run *run,
		       char *err, size_t errlen)
{
	struct yield_sh sh;
	struct rb_sched s = mk_sched(env, 0, env->cpu);
	pthread_t a, b;
	int e;

	if (!env->rt) {
		snprintf(err, errlen, "requires SCHED_FIFO (sched_yield between "
			 "SCHED_OTHER threads does not guarantee a switch)");
		return RB_SKIP;
	}
	memset(&sh, 0, sizeof(sh));
	sh.env = env;
	sh.run = run;
	sh.err = err;
	sh.errlen = errlen;
	sem_init(&sh.unpark, 0, 0);
	e = rb_thread_create(&b, &s, yield_partner, &sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating thread", e);
		sem_destroy(&sh.unpark);
		return RB_ERROR;
	}
	e = rb_thread_create(&a, &s, yield_main, &sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating thread", e);
		atomic_store(&sh.stop, 1);
		sem_post(&sh.unpark);
		pthread_join(b, NULL);
		sem_destroy(&sh.unpark);
		return RB_ERROR;
	}
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	sem_destroy(&sh.unpark);
	if (sh.status != RB_OK)
		snprintf(err, errlen, "out of memory");
	return sh.status;
}

/* ---- context switch: semaphore ping-pong ---------------------------------- */

struct pp_sh {
	const struct rb_env *env;
	sem_t sa, sb;
	atomic_long cnt;
	atomic_int stop;
	struct rb_run *run;
	int status;
};

static void *pp_partner(void *p)
{
	struct pp_sh *sh = p;

	rb_prefault_stack(RB_STACK_PREFAULT);
	for (;;) {
		sem_wait_nointr(&sh->sb);
		if (atomic_load_explicit(&sh->stop, memory_order_relaxed))
			break;
		atomic_store_explicit(&sh->cnt,
				      atomic_load_explicit(&sh->cnt,
							   memory_order_relaxed) + 1,
				      memory_order_relaxed);
		sem_post(&sh->sa);
	}
	return NULL;
}

static int pp_iter(void *p, int64_t *raw, uint8_t *reason)
{
	struct pp_sh *sh = p;
	long n0;
	int64_t t0, t1;
	int c0, c1;

	c0 = sched_getcpu();
	n0 = atomic_load_explicit(&sh->cnt, memory_order_relaxed);
	rb_barrier();
	t0 = rb_now();
	rb_barrier();
	sem_post(&sh->sb);
	sem_wait_nointr(&sh->sa);
	rb_barrier();
	t1 = rb_now();
	rb_barrier();
	c1 = sched_getcpu();
	*raw = t1 - t0;
	*reason = (c0 != c1 || (sh->env->cpu >= 0 && c0 != sh->env->cpu)) ?
		  RB_MIGRATION :
		  atomic_load_explicit(&sh->cnt, memory_order_relaxed) == n0 ?
		  RB_NO_SWITCH : RB_KEPT;
	return 0;
}

static void *pp_main(void *p)
{
	struct pp_sh *sh = p;
	struct driver d = { pp_iter, self_nivcsw, NULL, sh, 0, NULL };
	struct counters c;

	rb_prefault_stack(RB_STACK_PREFAULT);
	counters_open(&c, sh->env, 0);
	sh->status = drive(sh->env, &c, &d, sh->run) ? RB_ERROR : RB_OK;
	counters_close(&c);
	atomic_store(&sh->stop, 1);
	sem_post(&sh->sb);
	return NULL;
}

int rb_run_ctxsw_sem(const struct rb_env *env, struct rb_run *run,
		     char *err, size_t errlen)
{
	struct pp_sh sh;
	struct rb_sched s = mk_sched(env, 0, env->cpu);
	pthread_t a, b;
	int e;

	memset(&sh, 0, sizeof(sh));
	sh.env = env;
	sh.run = run;
	sem_init(&sh.sa, 0, 0);
	sem_init(&sh.sb, 0, 0);
	e = rb_thread_create(&b, &s, pp_partner, &sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating thread", e);
		return RB_ERROR;
	}
	e = rb_thread_create(&a, &s, pp_main, &sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating thread", e);
		atomic_store(&sh.stop, 1);
		sem_post(&sh.sb);
		pthread_join(b, NULL);
		return RB_ERROR;
	}
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	sem_destroy(&sh.sa);
	sem_destroy(&sh.sb);
	if (sh.status != RB_OK)
		snprintf(err, errlen, "out of memory");
	return sh.status;
}

/* ---- priority inversion with a PI mutex ----------------------------------- */

struct pi_mbox {
	int64_t t0, t1;
	int cpu0, cpu1;
	int slept;
	int err;
	long nivcsw;
};

struct pi_sh {
	const struct rb_env *env;
	pthread_mutex_t lock;
	sem_t sem_h, sem_m;
	atomic_int stop;
	long iter;
	struct rb_run *run;
	int status;
	char *err;
	size_t errlen;
	_Alignas(RB_CACHELINE) atomic_long round;
	_Alignas(RB_CACHELINE) atomic_long done;
	_Alignas(RB_CACHELINE) struct pi_mbox mbox;
	_Alignas(RB_CACHELINE) atomic_long m_timeouts;
};

/* high priority: request the lock held by low, time until acquired */
static void *pi_high(void *p)
{
	struct pi_sh *sh = p;

	rb_prefault_stack(RB_STACK_PREFAULT);
	for (;;) {
		long i, nv0, nv1, niv1;
		int64_t t0, t1;
		int c0, c1, e;

		sem_wait_nointr(&sh->sem_h);
		if (atomic_load(&sh->stop))
			break;
		i = atomic_load(&sh->round);
		c0 = sched_getcpu();
		rb_thread_csw(NULL, &nv0);
		rb_barrier();
		t0 = rb_now();
		rb_barrier();
		e = pthread_mutex_lock(&sh->lock);
		rb_barrier();
		t1 = rb_now();
		rb_barrier();
		c1 = sched_getcpu();
		if (!e)
			pthread_mutex_unlock(&sh->lock);
		rb_thread_csw(&niv1, &nv1);
		sh->mbox.t0 = t0;
		sh->mbox.t1 = t1;
		sh->mbox.cpu0 = c0;
		sh->mbox.cpu1 = c1;
		sh->mbox.slept = nv1 != nv0;
		sh->mbox.err = e;
		sh->mbox.nivcsw = niv1;
		atomic_store_explicit(&sh->done, i, memory_order_release);
	}
	return NULL;
}

/* medium priority: wake high, then spin (CPU hog) until high is done */
static void *pi_medium(void *p)
{
	struct pi_sh *sh = p;

	rb_prefault_stack(RB_STACK_PREFAULT);
	for (;;) {
		long r;
		int64_t deadline;

		sem_wait_nointr(&sh->sem_m);
		if (atomic_load(&sh->stop))
			break;
		r = atomic_load(&sh->round);
		sem_post(&sh->sem_h);
		deadline = rb_now() + RB_PI_SPIN_NS;
		while (atomic_load_explicit(&sh->done, memory_order_acquire) < r) {
			if (rb_now() > deadline) {
				atomic_fetch_add(&sh->m_timeouts, 1);
				break;
			}
			rb_cpu_relax();
		}
	}
	return NULL;
}

/* low priority (controller): take the lock, start medium, release */
static int pi_iter(void *p, int64_t *raw, uint8_t *reason)
{
	struct pi_sh *sh = p;
	long i = ++sh->iter;
	int mig;

	atomic_store(&sh->round, i);
	pthread_mutex_lock(&sh->lock);
	sem_post(&sh->sem_m);	/* medium preempts us, wakes high, which
				 * blocks on the lock and boosts us */
	pthread_mutex_unlock(&sh->lock);
	if (spin_until(&sh->done, i, 1, sh->env->timeout_ns)) {
		snprintf(sh->err, sh->errlen,
			 "timeout: high-priority thread never got the lock");
		return -1;
	}
	if (sh->mbox.err) {
		snprintf(sh->err, sh->errlen, "pthread_mutex_lock: %s",
			 strerror(sh->mbox.err));
		return -1;
	}
	*raw = sh->mbox.t1 - sh->mbox.t0;
	mig = sh->mbox.cpu0 != sh->mbox.cpu1 || sh->mbox.cpu0 != sh->env->cpu;
	*reason = mig ? RB_MIGRATION : !sh->mbox.slept ? RB_NOT_BLOCKED :
		  RB_KEPT;
	return 0;
}

static uint64_t pi_csw(void *p)
{
	struct pi_sh *sh = p;

	return (uint64_t)sh->mbox.nivcsw;	/* high must never be preempted */
}

static void *pi_low(void *p)
{
	struct pi_sh *sh = p;
	struct driver d = { pi_iter, pi_csw, NULL, sh, 0, NULL };
	struct counters c;

	rb_prefault_stack(RB_STACK_PREFAULT);
	counters_open(&c, sh->env, 0);
	sh->status = drive(sh->env, &c, &d, sh->run) ? RB_ERROR : RB_OK;
	counters_close(&c);
	return NULL;
}

int rb_run_prio_inversion(const struct rb_env *env, struct rb_run *run,
			  char *err, size_t errlen)
{
	struct pi_sh *sh;
	pthread_mutexattr_t ma;
	pthread_t th, tm, tl;
	struct rb_sched sh_s = mk_sched(env, 0, env->cpu);
	struct rb_sched sm_s = mk_sched(env, -5, env->cpu);
	struct rb_sched sl_s = mk_sched(env, -10, env->cpu);
	int e, stuck = 0;

	if (!env->rt) {
		snprintf(err, errlen, "requires SCHED_FIFO (priority inversion "
			 "needs strict priorities)");
		return RB_SKIP;
	}
	sh = aligned_alloc(RB_CACHELINE, (sizeof(*sh) + RB_CACHELINE - 1) /
			   RB_CACHELINE * RB_CACHELINE);
	if (!sh) {
		snprintf(err, errlen, "out of memory");
		return RB_ERROR;
	}
	memset(sh, 0, sizeof(*sh));
	sh->env = env;
	sh->run = run;
	sh->err = err;
	sh->errlen = errlen;
	pthread_mutexattr_init(&ma);
	e = pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
	if (!e)
		e = pthread_mutex_init(&sh->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (e) {
		set_err(err, errlen, "%s: %s", "PTHREAD_PRIO_INHERIT mutex", e);
		free(sh);
		return RB_SKIP;
	}
	/* probe: a kernel without futex PI support fails here */
	e = pthread_mutex_lock(&sh->lock);
	if (e) {
		set_err(err, errlen, "%s: %s", "PI mutex lock", e);
		pthread_mutex_destroy(&sh->lock);
		free(sh);
		return RB_SKIP;
	}
	pthread_mutex_unlock(&sh->lock);
	sem_init(&sh->sem_h, 0, 0);
	sem_init(&sh->sem_m, 0, 0);
	e = rb_thread_create(&th, &sh_s, pi_high, sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating thread", e);
		free(sh);
		return RB_ERROR;
	}
	e = rb_thread_create(&tm, &sm_s, pi_medium, sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating thread", e);
		atomic_store(&sh->stop, 1);
		sem_post(&sh->sem_h);
		pthread_join(th, NULL);
		free(sh);
		return RB_ERROR;
	}
	e = rb_thread_create(&tl, &sl_s, pi_low, sh);
	if (e) {
		set_err(err, errlen, "%s: %s", "creating thread", e);
		sh->status = RB_ERROR;
	} else {
		pthread_join(tl, NULL);
	}
	atomic_store(&sh->stop, 1);
	sem_post(&sh->sem_h);
	sem_post(&sh->sem_m);
	if (rb_thread_join_timeout(th, 2 * RB_NSEC_PER_SEC)) {
		pthread_detach(th);
		stuck = 1;
	}
	if (rb_thread_join_timeout(tm, 2 * RB_NSEC_PER_SEC)) {
		pthread_detach(tm);
		stuck = 1;
	}
	if (stuck) {
		if (sh->status == RB_OK)
			snprintf(err, errlen, "threads could not be stopped");
		return RB_ERROR;	/* leak sh: threads may still use it */
	}
	e = sh->status;
	if (e == RB_ERROR && !err[0])
		snprintf(err, errlen, "out of memory");
	pthread_mutex_destroy(&sh->lock);
	sem_destroy(&sh->sem_h);
	sem_destroy(&sh->sem_m);
	free(sh);
	return e;
}
