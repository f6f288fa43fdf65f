/* rtbench - sample storage, disturbance accounting and statistics.
 *
 * A benchmark run produces, per iteration, one raw duration (t1 - t0 in ns,
 * timestamp overhead still included) and a discard reason decided exactly
 * at sampling time (migration, not_blocked, no_switch). It also closes
 * "windows" of consecutive samples and records, per window, the number of
 * interrupts seen on the involved CPUs and the number of involuntary
 * context switches of the measured threads. rb_finalize() then:
 *   1. value = round((raw - overhead) / divisor)
 *   2. outlier bound = Q3 + max(3 * IQR, min_margin) over the samples kept
 *      so far (Tukey's "far out" fence with an absolute floor)
 *   3. per window, the k largest kept samples above the bound are
 *      discarded, k = involuntary switches ("preempted") and then
 *      max(0, interrupts - preempted discards) ("interrupt"); an interrupt
 *      that caused a preemption is thus counted once. Samples below the
 *      bound are never discarded: disturbances too small to stand out of
 *      the natural spread stay in the data.
 *   4. kept values < 0 are clamped to 0 (counted), then min/avg/max,
 *      median, p99 and the histogram are computed from the kept values.
 */
#ifndef RTBENCH_STATS_H
#define RTBENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

enum rb_reason {
	RB_KEPT = 0,
	RB_MIGRATION,	/* sched_getcpu() changed or not the pinned CPU */
	RB_PREEMPTED,	/* involuntary context switch (getrusage nivcsw) */
	RB_INTERRUPT,	/* interrupt on an involved CPU (/proc/interrupts) */
	RB_NOT_BLOCKED,	/* wake-up sample whose waiter never slept (nvcsw) */
	RB_NO_SWITCH,	/* context-switch sample where no switch happened */
	RB_NREASONS
};

extern const char *const rb_reason_names[RB_NREASONS];

struct rb_run {
	size_t cap, n;
	int64_t *raw;
	uint8_t *reason;
	size_t wcap, nwin;
	size_t *win_end;	/* window w = [win_end[w-1], win_end[w]) */
	uint64_t *win_irq;
	uint64_t *win_csw;
};

int rb_run_init(struct rb_run *r, size_t cap);
void rb_run_free(struct rb_run *r);

static inline void rb_run_add(struct rb_run *r, int64_t raw, uint8_t reason)
{
	if (r->n < r->cap) {
		r->raw[r->n] = raw;
		r->reason[r->n] = reason;
		r->n++;
	}
}

/* Close the window [end of previous window, r->n). Empty windows ignored.
 * Returns 0 or -1 (out of memory). */
int rb_run_close_window(struct rb_run *r, uint64_t irq, uint64_t csw);

struct rb_stat_cfg {
	int64_t overhead;	/* ns subtracted from every raw sample */
	int divisor;		/* e.g. 2 for a ping-pong round trip */
	int64_t bucket_ns;	/* histogram bucket width */
	size_t hist_size;	/* number of buckets */
	int64_t min_margin_ns;	/* floor of the outlier fence margin */
};

struct rb_result {
	uint64_t iterations, samples, discarded;
	uint64_t reasons[RB_NREASONS];
	uint64_t clamped;
	int64_t min, max, median, p99;
	double avg;
	int64_t bound;		/* outlier fence used for attribution */
	int64_t overhead;
	int divisor;
	int64_t bucket_ns;
	size_t hist_size;
	uint64_t *hist;
	uint64_t overflows;
};

int rb_finalize(const struct rb_run *r, const struct rb_stat_cfg *cfg,
		struct rb_result *res);
void rb_result_free(struct rb_result *res);

/* Building blocks, exposed for the unit tests. */
int64_t rb_value(int64_t raw, int64_t overhead, int divisor);
/* nearest-rank quantile of a sorted array, q in [0,1]; n > 0 */
int64_t rb_quantile_sorted(const int64_t *sorted, size_t n, double q);
int64_t rb_outlier_bound(const int64_t *sorted, size_t n, int64_t min_margin);
size_t rb_attribute_window(const int64_t *val, uint8_t *reason, size_t lo,
			   size_t hi, int64_t bound, uint64_t events,
			   uint8_t why);
void rb_sort_i64(int64_t *v, size_t n);
/* Median of raw[] over samples with reason RB_KEPT (overhead calibration);
 * returns 0 if there is none. */
int64_t rb_median_kept_raw(const struct rb_run *r);

#endif
