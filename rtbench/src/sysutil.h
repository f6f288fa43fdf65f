/* rtbench - system helpers: time, CPU placement, scheduling, counters.
 *
 * Everything here is small and deliberately boring: the timing path is
 * rb_now() (clock_gettime(CLOCK_MONOTONIC) via the vDSO) and nothing else.
 */
#ifndef RTBENCH_SYSUTIL_H
#define RTBENCH_SYSUTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define RB_NSEC_PER_SEC 1000000000LL

/* The one timestamp source of rtbench. Inline so that the timed region is
 * exactly "vDSO call, op, vDSO call". */
static inline int64_t rb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * RB_NSEC_PER_SEC + (int64_t)ts.tv_nsec;
}

/* Compiler barrier: keeps the compiler from moving memory accesses across
 * the timestamps. */
#define rb_barrier() __asm__ __volatile__("" ::: "memory")

/* Instruction-stream serialisation around the timed operation, so that a
 * short op cannot execute in the shadow of the timestamp code (out-of-order
 * overlap would hide its latency). x86: LFENCE (dispatch-serialising; Linux
 * makes it so on AMD too); ARM: ISB. Present in the calibration as well, so
 * its own cost is part of the subtracted overhead. */
static inline void rb_serialize(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("lfence" ::: "memory");
#elif defined(__aarch64__) || defined(__arm__)
	__asm__ __volatile__("isb" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

static inline void rb_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	rb_barrier();
#endif
}

/* Busy-wait for ns nanoseconds (used only outside timed regions). */
void rb_spin_ns(int64_t ns);
/* Sleep for ns nanoseconds (clock_nanosleep, relative). */
void rb_sleep_ns(int64_t ns);

pid_t rb_gettid(void);

/* Scheduling attributes of a benchmark thread. policy is SCHED_FIFO or
 * SCHED_OTHER (fallback); cpu < 0 means "do not pin". */
struct rb_sched {
	int policy;
	int prio;
	int cpu;
};

/* Apply rb_sched to the calling thread. Returns 0 or an errno value. */
int rb_sched_self(const struct rb_sched *s);

/* Create a thread with explicit scheduling, CPU pinning and a small
 * (prefaulted by the thread itself) stack. Returns 0 or an errno value. */
int rb_thread_create(pthread_t *t, const struct rb_sched *s,
		     void *(*fn)(void *), void *arg);

/* Join with a deadline; returns 0, or ETIMEDOUT (thread left running). */
int rb_thread_join_timeout(pthread_t t, int64_t timeout_ns);

/* Touch size bytes of stack so later page faults do not land in samples. */
void rb_prefault_stack(size_t size);

/* Involuntary / voluntary context switches of the calling thread
 * (getrusage(RUSAGE_THREAD)). */
void rb_thread_csw(long *nivcsw, long *nvcsw);

/* CPUs this process may run on, in ascending order. Returns count. */
int rb_allowed_cpus(int *cpus, int max);

/* ---- /proc/interrupts ----------------------------------------------
 * Per-CPU interrupt totals. Lines whose description contains
 * "Rescheduling" (x86 RES, arm/arm64 IPI0) are excluded: rescheduling
 * IPIs are how a cross-CPU wake-up is delivered, i.e. part of what is
 * measured, not a disturbance. ERR/MIS (global error counters) are
 * excluded too. */
struct rb_irq {
	int fd;
	char *buf;
	size_t cap;
};

int rb_irq_open(struct rb_irq *irq);	/* 0 ok, -1 unavailable */
void rb_irq_close(struct rb_irq *irq);
/* Sum of interrupt counts of the given CPUs; returns 0 ok, -1 error. */
int rb_irq_read(struct rb_irq *irq, const int *cpus, int ncpus,
		uint64_t *total);
/* Pure parser (unit-tested): text is the content of /proc/interrupts. */
int rb_irq_parse(const char *text, const int *cpus, int ncpus,
		 uint64_t *total);

/* ---- thread state from /proc/self/task/TID/stat --------------------- */
struct rb_taskstat {
	int fd;
};
int rb_taskstat_open(struct rb_taskstat *ts, pid_t tid);
void rb_taskstat_close(struct rb_taskstat *ts);
/* State letter ('R', 'S', 'D', ...) or 0 on error. */
char rb_taskstat_state(struct rb_taskstat *ts);
/* Pure parser (unit-tested). */
char rb_taskstat_parse(const char *text);

#endif
