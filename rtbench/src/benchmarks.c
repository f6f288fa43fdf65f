/* rtbench - the benchmarks: what is timed, for each primitive. */
#include "benchmarks.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sysutil.h"

#define ERR(...) snprintf(err, errlen, __VA_ARGS__)

__attribute__((noinline)) void rb_null_op(void *ctx)
{
	(void)ctx;
	__asm__ __volatile__("" ::: "memory");
}

static const struct rb_single_ops null_ops = { .op = rb_null_op };

/* ---- semaphores --------------------------------------------------------- */

struct sem_ctx {
	sem_t s;
};

static int sem_setup(void **ctx, char *err, size_t errlen)
{
	struct sem_ctx *c = calloc(1, sizeof(*c));

	if (!c || sem_init(&c->s, 0, 0)) {
		ERR("sem_init: %s", strerror(errno));
		free(c);
		return RB_ERROR;
	}
	*ctx = c;
	return RB_OK;
}

static void sem_teardown(void *ctx)
{
	struct sem_ctx *c = ctx;

	sem_destroy(&c->s);
	free(c);
}

static void sem_op_post(void *ctx)
{
	sem_post(&((struct sem_ctx *)ctx)->s);
}

static void sem_op_wait(void *ctx)
{
	sem_wait(&((struct sem_ctx *)ctx)->s);
}

static void sem_op_trywait(void *ctx)
{
	sem_trywait(&((struct sem_ctx *)ctx)->s);
}

static void sem_op_pair(void *ctx)
{
	struct sem_ctx *c = ctx;

	sem_post(&c->s);
	sem_wait(&c->s);
}

static const struct rb_single_ops sem_post_ops = {
	sem_setup, sem_teardown, NULL, sem_op_post, sem_op_trywait,
};
static const struct rb_single_ops sem_wait_ops = {
	sem_setup, sem_teardown, sem_op_post, sem_op_wait, NULL,
};
static const struct rb_single_ops sem_trywait_ops = {
	sem_setup, sem_teardown, NULL, sem_op_trywait, NULL,
};
static const struct rb_single_ops sem_pair_ops = {
	sem_setup, sem_teardown, NULL, sem_op_pair, NULL,
};

/* ---- mutexes ---------------------------------------------------------------- */

struct mutex_ctx {
	pthread_mutex_t m;
};

static int mutex_setup_proto(void **ctx, char *err, size_t errlen, int proto)
{
	struct mutex_ctx *c = calloc(1, sizeof(*c));
	pthread_mutexattr_t a;
	int e;

	if (!c) {
		ERR("out of memory");
		return RB_ERROR;
	}
	pthread_mutexattr_init(&a);
	e = pthread_mutexattr_setprotocol(&a, proto);
	if (!e)
		e = pthread_mutex_init(&c->m, &a);
	pthread_mutexattr_destroy(&a);
	if (!e) {
		e = pthread_mutex_lock(&c->m);	/* probe (PI needs futex PI) */
		if (!e)
			pthread_mutex_unlock(&c->m);
	}
	if (e) {
		ERR("mutex: %s", strerror(e));
		free(c);
		return RB_SKIP;
	}
	*ctx = c;
	return RB_OK;
}

static int mutex_setup(void **ctx, char *err, size_t errlen)
{
	return mutex_setup_proto(ctx, err, errlen, PTHREAD_PRIO_NONE);
}

static int mutex_pi_setup(void **ctx, char *err, size_t errlen)
{
	return mutex_setup_proto(ctx, err, errlen, PTHREAD_PRIO_INHERIT);
}

static void mutex_teardown(void *ctx)
{
	struct mutex_ctx *c = ctx;

	pthread_mutex_destroy(&c->m);
	free(c);
}

static void mutex_op_lock(void *ctx)
{
	pthread_mutex_lock(&((struct mutex_ctx *)ctx)->m);
}

static void mutex_op_unlock(void *ctx)
{
	pthread_mutex_unlock(&((struct mutex_ctx *)ctx)->m);
}

static const struct rb_single_ops mutex_lock_ops = {
	mutex_setup, mutex_teardown, NULL, mutex_op_lock, mutex_op_unlock,
};
static const struct rb_single_ops mutex_unlock_ops = {
	mutex_setup, mutex_teardown, mutex_op_lock, mutex_op_unlock, NULL,
};
static const struct rb_single_ops mutex_pi_lock_ops = {
	mutex_pi_setup, mutex_teardown, NULL, mutex_op_lock, mutex_op_unlock,
};
static const struct rb_single_ops mutex_pi_unlock_ops = {
	mutex_pi_setup, mutex_teardown, mutex_op_lock, mutex_op_unlock, NULL,
};

/* ---- thread create + join -------------------------------------------------- */

struct thread_ctx {
	pthread_attr_t attr;
};

static void *noop_thread(void *arg)
{
	return arg;
}

static int thread_setup(void **ctx, char *err, size_t errlen)
{
	struct thread_ctx *c = calloc(1, sizeof(*c));
	pthread_t t;
	int e;

	if (!c) {
		ERR("out of memory");
		return RB_ERROR;
	}
	/* inherits the creator's policy, priority and CPU (PTHREAD_INHERIT_
	 * SCHED, the default); small stack so mlockall'ed boards cope */
	pthread_attr_init(&c->attr);
	pthread_attr_setstacksize(&c->attr, 256 * 1024);
	e = pthread_create(&t, &c->attr, noop_thread, NULL);
	if (!e)
		pthread_join(t, NULL);
	if (e) {
		ERR("pthread_create: %s", strerror(e));
		pthread_attr_destroy(&c->attr);
		free(c);
		return RB_ERROR;
	}
	*ctx = c;
	return RB_OK;
}

static void thread_teardown(void *ctx)
{
	struct thread_ctx *c = ctx;

	pthread_attr_destroy(&c->attr);
	free(c);
}

static void thread_op(void *ctx)
{
	struct thread_ctx *c = ctx;
	pthread_t t;

	if (pthread_create(&t, &c->attr, noop_thread, NULL) == 0)
		pthread_join(t, NULL);
}

static const struct rb_single_ops thread_ops = {
	thread_setup, thread_teardown, NULL, thread_op, NULL,
};

/* ---- POSIX timers ------------------------------------------------------------ */

struct timer_ctx {
	timer_t t;
	int have;
};

static int timer_make(timer_t *t)
{
	struct sigevent sev;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_NONE;
	return timer_create(CLOCK_MONOTONIC, &sev, t);
}

static int timer_setup0(void **ctx, char *err, size_t errlen, int create)
{
	struct timer_ctx *c = calloc(1, sizeof(*c));
	timer_t t;

	if (!c) {
		ERR("out of memory");
		return RB_ERROR;
	}
	if (timer_make(&t)) {
		int e = errno;

		ERR("timer_create: %s", strerror(e));
		free(c);
		return e == ENOSYS ? RB_SKIP : RB_ERROR;
	}
	if (create) {
		c->t = t;
		c->have = 1;
	} else {
		timer_delete(t);
	}
	*ctx = c;
	return RB_OK;
}

static int timer_setup_probe(void **ctx, char *err, size_t errlen)
{
	return timer_setup0(ctx, err, errlen, 0);
}

static int timer_setup_keep(void **ctx, char *err, size_t errlen)
{
	return timer_setup0(ctx, err, errlen, 1);
}

static void timer_teardown(void *ctx)
{
	struct timer_ctx *c = ctx;

	if (c->have)
		timer_delete(c->t);
	free(c);
}

static void timer_op_create(void *ctx)
{
	struct timer_ctx *c = ctx;

	c->have = timer_make(&c->t) == 0;
}

static void timer_op_delete(void *ctx)
{
	struct timer_ctx *c = ctx;

	if (c->have)
		timer_delete(c->t);
	c->have = 0;
}

static const struct itimerspec one_second = { .it_value = { 1, 0 } };
static const struct itimerspec disarmed;

static void timer_op_arm(void *ctx)
{
	timer_settime(((struct timer_ctx *)ctx)->t, 0, &one_second, NULL);
}

static void timer_op_cancel(void *ctx)
{
	timer_settime(((struct timer_ctx *)ctx)->t, 0, &disarmed, NULL);
}

static const struct rb_single_ops timer_create_ops = {
	timer_setup_probe, timer_teardown, NULL, timer_op_create,
	timer_op_delete,
};
static const struct rb_single_ops timer_delete_ops = {
	timer_setup_probe, timer_teardown, timer_op_create, timer_op_delete,
	NULL,
};
static const struct rb_single_ops timer_arm_ops = {
	timer_setup_keep, timer_teardown, NULL, timer_op_arm, timer_op_cancel,
};
static const struct rb_single_ops timer_cancel_ops = {
	timer_setup_keep, timer_teardown, timer_op_arm, timer_op_cancel, NULL,
};

/* ---- message queue open / close ------------------------------------------- */

struct mq_ctx {
	char name[64];
	mqd_t anchor;	/* keeps the queue alive */
	mqd_t q;
};

static int mq_make(char *name, size_t len, mqd_t *q, const char *tag,
		   char *err, size_t errlen)
{
	struct mq_attr attr = { .mq_maxmsg = 1, .mq_msgsize = 8 };

	snprintf(name, len, "/rtbench-%s-%d", tag, (int)getpid());
	mq_unlink(name);
	*q = mq_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600, &attr);
	if (*q == (mqd_t)-1) {
		int e = errno;

		ERR("mq_open: %s%s", strerror(e), e == ENOSYS ?
		    " (kernel without CONFIG_POSIX_MQUEUE)" : "");
		return e == ENOSYS ? RB_SKIP : RB_ERROR;
	}
	return RB_OK;
}

static int mq_setup(void **ctx, char *err, size_t errlen)
{
	struct mq_ctx *c = calloc(1, sizeof(*c));
	int r;

	if (!c) {
		ERR("out of memory");
		return RB_ERROR;
	}
	r = mq_make(c->name, sizeof(c->name), &c->anchor, "oc", err, errlen);
	if (r != RB_OK) {
		free(c);
		return r;
	}
	c->q = (mqd_t)-1;
	*ctx = c;
	return RB_OK;
}

static void mq_teardown(void *ctx)
{
	struct mq_ctx *c = ctx;

	if (c->q != (mqd_t)-1)
		mq_close(c->q);
	mq_close(c->anchor);
	mq_unlink(c->name);
	free(c);
}

static void mq_op_open(void *ctx)
{
	struct mq_ctx *c = ctx;

	c->q = mq_open(c->name, O_RDWR);
}

static void mq_op_close(void *ctx)
{
	struct mq_ctx *c = ctx;

	if (c->q != (mqd_t)-1)
		mq_close(c->q);
	c->q = (mqd_t)-1;
}

static const struct rb_single_ops mq_open_ops = {
	mq_setup, mq_teardown, NULL, mq_op_open, mq_op_close,
};
static const struct rb_single_ops mq_close_ops = {
	mq_setup, mq_teardown, mq_op_open, mq_op_close, NULL,
};

/* ---- wake-ups ------------------------------------------------------------------- */

/* semaphore */
static int wsem_wait(void *ctx)
{
	while (sem_wait(&((struct sem_ctx *)ctx)->s))
		if (errno != EINTR)
			return errno;
	return 0;
}

static int64_t wsem_post(void *ctx)
{
	int64_t t0 = rb_now();

	rb_barrier();
	sem_post(&((struct sem_ctx *)ctx)->s);
	return t0;
}

static const struct rb_wake_ops wake_sem_ops = {
	sem_setup, sem_teardown, NULL, wsem_wait, NULL, wsem_post,
};

/* mutex hand-off: poster holds the mutex, waiter blocks in lock */
static void wmutex_arm(void *ctx)
{
	pthread_mutex_lock(&((struct mutex_ctx *)ctx)->m);
}

static int wmutex_wait(void *ctx)
{
	return pthread_mutex_lock(&((struct mutex_ctx *)ctx)->m);
}

static void wmutex_after(void *ctx)
{
	pthread_mutex_unlock(&((struct mutex_ctx *)ctx)->m);
}

static int64_t wmutex_post(void *ctx)
{
	int64_t t0 = rb_now();

	rb_barrier();
	pthread_mutex_unlock(&((struct mutex_ctx *)ctx)->m);
	return t0;
}

static const struct rb_wake_ops wake_mutex_ops = {
	mutex_setup, mutex_teardown, wmutex_arm, wmutex_wait, wmutex_after,
	wmutex_post,
};

/* message queue */
struct wmq_ctx {
	char name[64];
	mqd_t q;
};

static int wmq_setup(void **ctx, char *err, size_t errlen)
{
	struct wmq_ctx *c = calloc(1, sizeof(*c));
	int r;

	if (!c) {
		ERR("out of memory");
		return RB_ERROR;
	}
	r = mq_make(c->name, sizeof(c->name), &c->q, "wake", err, errlen);
	if (r != RB_OK) {
		free(c);
		return r;
	}
	mq_unlink(c->name);	/* lives as long as it is open */
	*ctx = c;
	return RB_OK;
}

static void wmq_teardown(void *ctx)
{
	struct wmq_ctx *c = ctx;

	mq_close(c->q);
	free(c);
}

static int wmq_wait(void *ctx)
{
	char buf[8];

	while (mq_receive(((struct wmq_ctx *)ctx)->q, buf, sizeof(buf),
			  NULL) < 0)
		if (errno != EINTR)
			return errno;
	return 0;
}

static int64_t wmq_post(void *ctx)
{
	static const char msg[8] = "rtbench";
	int64_t t0 = rb_now();

	rb_barrier();
	mq_send(((struct wmq_ctx *)ctx)->q, msg, sizeof(msg), 0);
	return t0;
}

static const struct rb_wake_ops wake_mq_ops = {
	wmq_setup, wmq_teardown, NULL, wmq_wait, NULL, wmq_post,
};

/* condition variable: signal while holding the mutex (the POSIX
 * recommendation for predictable scheduling), then unlock */
struct wcond_ctx {
	pthread_mutex_t m;
	pthread_cond_t c;
	int flag;
};

static int wcond_setup(void **ctx, char *err, size_t errlen)
{
	struct wcond_ctx *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;

	if (!c) {
		ERR("out of memory");
		return RB_ERROR;
	}
	pthread_mutex_init(&c->m, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->c, &ca);
	pthread_condattr_destroy(&ca);
	*ctx = c;
	return RB_OK;
}

static void wcond_teardown(void *ctx)
{
	struct wcond_ctx *c = ctx;

	pthread_cond_destroy(&c->c);
	pthread_mutex_destroy(&c->m);
	free(c);
}

static int wcond_wait(void *ctx)
{
	struct wcond_ctx *c = ctx;
	int e = 0;

	pthread_mutex_lock(&c->m);
	while (!c->flag && !e)
		e = pthread_cond_wait(&c->c, &c->m);
	c->flag = 0;
	return e;	/* returns with the mutex held */
}

static void wcond_after(void *ctx)
{
	pthread_mutex_unlock(&((struct wcond_ctx *)ctx)->m);
}

static int64_t wcond_post(void *ctx)
{
	struct wcond_ctx *c = ctx;
	int64_t t0;

	pthread_mutex_lock(&c->m);
	c->flag = 1;
	t0 = rb_now();
	rb_barrier();
	pthread_cond_signal(&c->c);
	pthread_mutex_unlock(&c->m);
	return t0;
}

static const struct rb_wake_ops wake_cond_ops = {
	wcond_setup, wcond_teardown, NULL, wcond_wait, wcond_after, wcond_post,
};

/* eventfd */
struct wefd_ctx {
	int fd;
};

static int wefd_setup(void **ctx, char *err, size_t errlen)
{
	struct wefd_ctx *c = calloc(1, sizeof(*c));

	if (!c) {
		ERR("out of memory");
		return RB_ERROR;
	}
	c->fd = eventfd(0, EFD_CLOEXEC);
	if (c->fd < 0) {
		int e = errno;

		ERR("eventfd: %s", strerror(e));
		free(c);
		return e == ENOSYS ? RB_SKIP : RB_ERROR;
	}
	*ctx = c;
	return RB_OK;
}

static void wefd_teardown(void *ctx)
{
	struct wefd_ctx *c = ctx;

	close(c->fd);
	free(c);
}

static int wefd_wait(void *ctx)
{
	uint64_t v;

	while (read(((struct wefd_ctx *)ctx)->fd, &v, sizeof(v)) < 0)
		if (errno != EINTR)
			return errno;
	return 0;
}

static int64_t wefd_post(void *ctx)
{
	uint64_t one = 1;
	int64_t t0 = rb_now();

	rb_barrier();
	if (write(((struct wefd_ctx *)ctx)->fd, &one, sizeof(one)) < 0)
		return t0;
	return t0;
}

static const struct rb_wake_ops wake_eventfd_ops = {
	wefd_setup, wefd_teardown, NULL, wefd_wait, NULL, wefd_post,
};

/* ---- the table ------------------------------------------------------------------ */

#define SINGLE(n, ops, m) { n, RB_K_SINGLE, &ops, NULL, 0, 1, m }
#define WAKE(n, ops, x, m) { n, RB_K_WAKE, NULL, &ops, x, 1, m }

#define WAKE_SAME "Waiter (SCHED_FIFO prio P) blocked on CPU -a; poster " \
	"(prio P-10) on the same CPU. t0: poster, immediately before the " \
	"waking call; t1: waiter, immediately after its blocking call " \
	"returns (includes the preemption of the poster)."
#define WAKE_OTHER "Waiter (SCHED_FIFO prio P) blocked on CPU -a; poster " \
	"(prio P-10) on CPU -b posts once /proc shows the waiter sleeping " \
	"plus the settle time. t0: poster, immediately before the waking " \
	"call; t1: waiter, immediately after its blocking call returns " \
	"(includes the IPI and the waiter CPU's idle exit)."

const struct rb_bench rb_benches[] = {
	{ "clock_gettime", RB_K_CALIB, &null_ops, NULL, 0, 1,
	  "t1 - t0 of two clock_gettime(CLOCK_MONOTONIC) around an empty "
	  "out-of-line call: the cost of one timestamp read as seen by every "
	  "benchmark. Nothing subtracted; its median is the overhead "
	  "subtracted everywhere else." },
	SINGLE("null", null_ops,
	       "The empty out-of-line call, measured after calibration like "
	       "any benchmark: must be ~0 after overhead subtraction."),
	SINGLE("sem_post_nowaiter", sem_post_ops,
	       "sem_post() on a semaphore nobody waits on (reset by an "
	       "untimed sem_trywait)."),
	SINGLE("sem_wait_available", sem_wait_ops,
	       "sem_wait() on a semaphore with count 1 (posted untimed)."),
	SINGLE("sem_trywait_unavailable", sem_trywait_ops,
	       "sem_trywait() on a semaphore with count 0 (EAGAIN)."),
	SINGLE("sem_post_wait_pair", sem_pair_ops,
	       "sem_post() then sem_wait() in one thread, no blocking."),
	SINGLE("mutex_lock", mutex_lock_ops,
	       "pthread_mutex_lock() of a free default mutex (unlocked "
	       "untimed)."),
	SINGLE("mutex_unlock", mutex_unlock_ops,
	       "pthread_mutex_unlock() of a default mutex without waiters "
	       "(locked untimed)."),
	SINGLE("mutex_pi_lock", mutex_pi_lock_ops,
	       "pthread_mutex_lock() of a free PTHREAD_PRIO_INHERIT mutex."),
	SINGLE("mutex_pi_unlock", mutex_pi_unlock_ops,
	       "pthread_mutex_unlock() of a PTHREAD_PRIO_INHERIT mutex "
	       "without waiters."),
	WAKE("wakeup_sem_samecpu", wake_sem_ops, 0, "sem_post -> sem_wait. "
	     WAKE_SAME),
	WAKE("wakeup_sem_othercpu", wake_sem_ops, 1, "sem_post -> sem_wait. "
	     WAKE_OTHER),
	WAKE("wakeup_mutex_samecpu", wake_mutex_ops, 0,
	     "Mutex hand-off: poster holds a default mutex, waiter blocks in "
	     "pthread_mutex_lock, poster unlocks. " WAKE_SAME),
	WAKE("wakeup_mutex_othercpu", wake_mutex_ops, 1,
	     "Mutex hand-off: poster holds a default mutex, waiter blocks in "
	     "pthread_mutex_lock, poster unlocks. " WAKE_OTHER),
	WAKE("wakeup_mq_samecpu", wake_mq_ops, 0,
	     "mq_send (8-byte message) -> mq_receive. " WAKE_SAME),
	WAKE("wakeup_mq_othercpu", wake_mq_ops, 1,
	     "mq_send (8-byte message) -> mq_receive. " WAKE_OTHER),
	WAKE("wakeup_cond_samecpu", wake_cond_ops, 0,
	     "pthread_cond_signal while holding the mutex, then unlock -> "
	     "pthread_cond_wait returns with the mutex re-acquired (on one "
	     "CPU the waiter wakes, blocks on the mutex, and wakes again). "
	     WAKE_SAME),
	WAKE("wakeup_cond_othercpu", wake_cond_ops, 1,
	     "pthread_cond_signal while holding the mutex, then unlock -> "
	     "pthread_cond_wait returns with the mutex re-acquired. "
	     WAKE_OTHER),
	WAKE("wakeup_eventfd_samecpu", wake_eventfd_ops, 0,
	     "write(eventfd, 1) -> blocking read(eventfd). " WAKE_SAME),
	WAKE("wakeup_eventfd_othercpu", wake_eventfd_ops, 1,
	     "write(eventfd, 1) -> blocking read(eventfd). " WAKE_OTHER),
	{ "context_switch", RB_K_CTXSW_YIELD, NULL, NULL, 0, 2,
	  "Two SCHED_FIFO threads of equal priority on CPU -a ping-pong with "
	  "sched_yield(). Sample = (round trip - overhead) / 2, i.e. one "
	  "sched_yield() syscall plus one switch. Samples where the partner "
	  "did not run are discarded (no_switch)." },
	{ "context_switch_sem", RB_K_CTXSW_SEM, NULL, NULL, 0, 2,
	  "Two SCHED_FIFO threads of equal priority on CPU -a ping-pong "
	  "through two semaphores (A: post B, wait A; B: wait B, post A). "
	  "Sample = (round trip - overhead) / 2, i.e. one waking sem_post, "
	  "one blocking sem_wait and one switch." },
	SINGLE("thread_create_join", thread_ops,
	       "pthread_create (256 KiB stack, scheduling inherited: same "
	       "CPU and priority) of an empty thread + pthread_join. Includes "
	       "running the thread and its exit; glibc's stack cache is warm."),
	SINGLE("timer_create", timer_create_ops,
	       "timer_create(CLOCK_MONOTONIC, SIGEV_NONE) (deleted untimed)."),
	SINGLE("timer_delete", timer_delete_ops,
	       "timer_delete() of a disarmed timer (created untimed)."),
	SINGLE("timer_arm", timer_arm_ops,
	       "timer_settime() arming a disarmed timer 1 s ahead (relative; "
	       "cancelled untimed)."),
	SINGLE("timer_cancel", timer_cancel_ops,
	       "timer_settime() with a zero it_value on an armed timer "
	       "(armed untimed)."),
	SINGLE("mq_open", mq_open_ops,
	       "mq_open(O_RDWR) of an existing queue (closed untimed)."),
	SINGLE("mq_close", mq_close_ops,
	       "mq_close() of a queue descriptor (opened untimed)."),
	{ "prio_inversion_pi", RB_K_PRIO_INV, NULL, NULL, 0, 1,
	  "All on CPU -a. Low (P-10) holds a PTHREAD_PRIO_INHERIT mutex and "
	  "wakes medium (P-5); medium wakes high (P) and then spins until high "
	  "is done (bounded at 5 ms); high requests the mutex. Sample = t0 "
	  "(high, before pthread_mutex_lock) to t1 (high, lock returned): the "
	  "boost of low over the spinning medium, low's unlock and the "
	  "hand-off." },
};

const size_t rb_nbenches = sizeof(rb_benches) / sizeof(rb_benches[0]);

const struct rb_bench *rb_bench_find(const char *name)
{
	size_t i;

	for (i = 0; i < rb_nbenches; i++)
		if (!strcmp(rb_benches[i].name, name))
			return &rb_benches[i];
	return NULL;
}

int rb_bench_run(const struct rb_bench *b, const struct rb_env *env,
		 struct rb_run *run, char *err, size_t errlen)
{
	err[0] = '\0';
	switch (b->kind) {
	case RB_K_CALIB:
	case RB_K_SINGLE:
		return rb_run_single(env, b->single, run, err, errlen);
	case RB_K_WAKE:
		return rb_run_wake(env, b->wake, b->cross, run, err, errlen);
	case RB_K_CTXSW_YIELD:
		return rb_run_ctxsw_yield(env, run, err, errlen);
	case RB_K_CTXSW_SEM:
		return rb_run_ctxsw_sem(env, run, err, errlen);
	case RB_K_PRIO_INV:
		return rb_run_prio_inversion(env, run, err, errlen);
	}
	snprintf(err, errlen, "unknown benchmark kind");
	return RB_ERROR;
}
