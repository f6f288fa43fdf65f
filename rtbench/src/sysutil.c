/* rtbench - system helpers (see sysutil.h). */
#include "sysutil.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RB_THREAD_STACK (256 * 1024)

void rb_spin_ns(int64_t ns)
{
	int64_t end = rb_now() + ns;

	while (rb_now() < end)
		rb_cpu_relax();
}

void rb_sleep_ns(int64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / RB_NSEC_PER_SEC),
		.tv_nsec = (long)(ns % RB_NSEC_PER_SEC),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

pid_t rb_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

int rb_sched_self(const struct rb_sched *s)
{
	struct sched_param sp = { .sched_priority = 0 };
	int err;

	if (s->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(s->cpu, &set);
		err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (err)
			return err;
	}
	if (s->policy == SCHED_FIFO)
		sp.sched_priority = s->prio;
	return pthread_setschedparam(pthread_self(), s->policy, &sp);
}

int rb_thread_create(pthread_t *t, const struct rb_sched *s,
		     void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	struct sched_param sp = { .sched_priority = 0 };
	int err;

	err = pthread_attr_init(&attr);
	if (err)
		return err;
	err = pthread_attr_setstacksize(&attr, RB_THREAD_STACK);
	if (!err)
		err = pthread_attr_setinheritsched(&attr,
						   PTHREAD_EXPLICIT_SCHED);
	if (!err)
		err = pthread_attr_setschedpolicy(&attr, s->policy);
	if (!err) {
		if (s->policy == SCHED_FIFO)
			sp.sched_priority = s->prio;
		err = pthread_attr_setschedparam(&attr, &sp);
	}
	if (!err && s->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(s->cpu, &set);
		err = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	if (!err)
		err = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return err;
}

int rb_thread_join_timeout(pthread_t t, int64_t timeout_ns)
{
	struct timespec ts;
	int64_t when;

	/* pthread_timedjoin_np takes CLOCK_REALTIME */
	clock_gettime(CLOCK_REALTIME, &ts);
	when = (int64_t)ts.tv_sec * RB_NSEC_PER_SEC + ts.tv_nsec + timeout_ns;
	ts.tv_sec = (time_t)(when / RB_NSEC_PER_SEC);
	ts.tv_nsec = (long)(when % RB_NSEC_PER_SEC);
	return pthread_timedjoin_np(t, NULL, &ts);
}

void rb_prefault_stack(size_t size)
{
	volatile unsigned char *buf = alloca(size);
	size_t i;

	for (i = 0; i < size; i += 256)
		buf[i] = 0;
}

void rb_thread_csw(long *nivcsw, long *nvcsw)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) != 0) {
		memset(&ru, 0, sizeof(ru));
	}
	if (nivcsw)
		*nivcsw = ru.ru_nivcsw;
	if (nvcsw)
		*nvcsw = ru.ru_nvcsw;
}

int rb_allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (i = 0; i < CPU_SETSIZE && n < max; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	return n;
}

/* ---- /proc/interrupts ------------------------------------------------ */

int rb_irq_open(struct rb_irq *irq)
{
	irq->cap = 64 * 1024;
	irq->buf = malloc(irq->cap);
	if (!irq->buf)
		return -1;
	irq->fd = open("/proc/interrupts", O_RDONLY | O_CLOEXEC);
	if (irq->fd < 0) {
		free(irq->buf);
		irq->buf = NULL;
		return -1;
	}
	return 0;
}

void rb_irq_close(struct rb_irq *irq)
{
	if (irq->fd >= 0)
		close(irq->fd);
	irq->fd = -1;
	free(irq->buf);
	irq->buf = NULL;
}

int rb_irq_read(struct rb_irq *irq, const int *cpus, int ncpus,
		uint64_t *total)
{
	size_t len = 0;

	if (!irq->buf || irq->fd < 0)
		return -1;
	if (lseek(irq->fd, 0, SEEK_SET) != 0)
		return -1;
	for (;;) {
		ssize_t r;

		if (len + 1 >= irq->cap) {
			size_t ncap = irq->cap * 2;
			char *nb = realloc(irq->buf, ncap);

			if (!nb)
				return -1;
			irq->buf = nb;
			irq->cap = ncap;
		}
		r = read(irq->fd, irq->buf + len, irq->cap - len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	irq->buf[len] = '\0';
	return rb_irq_parse(irq->buf, cpus, ncpus, total);
}

#define RB_MAX_COLS 4096

int rb_irq_parse(const char *text, const int *cpus, int ncpus,
		 uint64_t *total)
{
	/* column index of each wanted CPU (-1: not online / not listed) */
	int want_col[16];
	int ncols = 0, i;
	const char *p = text, *eol;
	uint64_t sum = 0;

	if (ncpus <= 0 || ncpus > 16)
		return -1;
	for (i = 0; i < ncpus; i++)
		want_col[i] = -1;

	/* header: "           CPU0       CPU1 ..." */
	eol = strchr(p, '\n');
	if (!eol)
		return -1;
	while (p < eol) {
		while (p < eol && isspace((unsigned char)*p))
			p++;
		if (p >= eol)
			break;
		if (strncmp(p, "CPU", 3) != 0)
			return -1;
		{
			char *end;
			long cpu = strtol(p + 3, &end, 10);

			if (end == p + 3)
				return -1;
			for (i = 0; i < ncpus; i++)
				if (cpus[i] == cpu)
					want_col[i] = ncols;
			ncols++;
			p = end;
		}
		if (ncols > RB_MAX_COLS)
			return -1;
	}
	if (ncols == 0)
		return -1;
	for (i = 0; i < ncpus; i++)
		if (want_col[i] < 0)
			return -1;

	p = eol + 1;
	while (*p) {
		const char *label, *colon;
		size_t labellen;
		uint64_t line_sum = 0;
		int col;

		eol = strchr(p, '\n');
		if (!eol)
			eol = p + strlen(p);
		while (p < eol && isspace((unsigned char)*p))
			p++;
		label = p;
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon) {
			p = *eol ? eol + 1 : eol;
			continue;
		}
		labellen = (size_t)(colon - label);
		p = colon + 1;
		for (col = 0; col < ncols; col++) {
			char *end;
			unsigned long long v;

			while (p < eol && (*p == ' ' || *p == '\t'))
				p++;
			if (p >= eol || !isdigit((unsigned char)*p))
				break;
			v = strtoull(p, &end, 10);
			p = end;
			for (i = 0; i < ncpus; i++)
				if (want_col[i] == col)
					line_sum += v;
		}
		{
			/* description = rest of the line */
			int skip = 0;
			size_t dlen = (size_t)(eol - p);

			if ((labellen == 3 && (!strncasecmp(label, "ERR", 3) ||
					       !strncasecmp(label, "MIS", 3))))
				skip = 1;
			if (col < ncols)	/* not a per-CPU line */
				skip = 1;
			if (dlen >= 12) {
				const char *q;

				for (q = p; q + 12 <= eol; q++)
					if (!strncmp(q, "Rescheduling", 12)) {
						skip = 1;
						break;
					}
			}
			if (!skip)
				sum += line_sum;
		}
		p = *eol ? eol + 1 : eol;
	}
	*total = sum;
	return 0;
}

/* ---- task state ------------------------------------------------------- */

int rb_taskstat_open(struct rb_taskstat *ts, pid_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	ts->fd = open(path, O_RDONLY | O_CLOEXEC);
	return ts->fd < 0 ? -1 : 0;
}

void rb_taskstat_close(struct rb_taskstat *ts)
{
	if (ts->fd >= 0)
		close(ts->fd);
	ts->fd = -1;
}

char rb_taskstat_state(struct rb_taskstat *ts)
{
	char buf[512];
	ssize_t r;

	if (ts->fd < 0)
		return 0;
	r = pread(ts->fd, buf, sizeof(buf) - 1, 0);
	if (r <= 0)
		return 0;
	buf[r] = '\0';
	return rb_taskstat_parse(buf);
}

char rb_taskstat_parse(const char *text)
{
	/* "TID (comm) S ..." ; comm may contain ')' so use the last one */
	const char *rp = strrchr(text, ')');

	if (!rp || rp[1] != ' ' || !rp[2])
		return 0;
	return rp[2];
}
