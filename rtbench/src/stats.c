/* rtbench - statistics (see stats.h for the procedure). */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const rb_reason_names[RB_NREASONS] = {
	[RB_KEPT] = "kept",
	[RB_MIGRATION] = "migration",
	[RB_PREEMPTED] = "preempted",
	[RB_INTERRUPT] = "interrupt",
	[RB_NOT_BLOCKED] = "not_blocked",
	[RB_NO_SWITCH] = "no_switch",
};

int rb_run_init(struct rb_run *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	if (cap == 0)
		cap = 1;
	r->cap = cap;
	r->raw = calloc(cap, sizeof(*r->raw));
	r->reason = calloc(cap, sizeof(*r->reason));
	r->wcap = 64;
	r->win_end = calloc(r->wcap, sizeof(*r->win_end));
	r->win_irq = calloc(r->wcap, sizeof(*r->win_irq));
	r->win_csw = calloc(r->wcap, sizeof(*r->win_csw));
	if (!r->raw || !r->reason || !r->win_end || !r->win_irq ||
	    !r->win_csw) {
		rb_run_free(r);
		return -1;
	}
	/* touch every page now: no first-touch faults between samples */
	memset(r->raw, 0, cap * sizeof(*r->raw));
	memset(r->reason, 0, cap * sizeof(*r->reason));
	return 0;
}

void rb_run_free(struct rb_run *r)
{
	free(r->raw);
	free(r->reason);
	free(r->win_end);
	free(r->win_irq);
	free(r->win_csw);
	memset(r, 0, sizeof(*r));
}

int rb_run_close_window(struct rb_run *r, uint64_t irq, uint64_t csw)
{
	size_t start = r->nwin ? r->win_end[r->nwin - 1] : 0;

	if (r->n <= start)
		return 0;
	if (r->nwin == r->wcap) {
		size_t nc = r->wcap * 2;
		size_t *e = realloc(r->win_end, nc * sizeof(*e));
		uint64_t *i, *c;

		if (!e)
			return -1;
		r->win_end = e;
		i = realloc(r->win_irq, nc * sizeof(*i));
		if (!i)
			return -1;
		r->win_irq = i;
		c = realloc(r->win_csw, nc * sizeof(*c));
		if (!c)
			return -1;
		r->win_csw = c;
		r->wcap = nc;
	}
	r->win_end[r->nwin] = r->n;
	r->win_irq[r->nwin] = irq;
	r->win_csw[r->nwin] = csw;
	r->nwin++;
	return 0;
}

int64_t rb_value(int64_t raw, int64_t overhead, int divisor)
{
	int64_t x = raw - overhead;

	if (divisor <= 1)
		return x;
	return (int64_t)llround((double)x / (double)divisor);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

void rb_sort_i64(int64_t *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_i64);
}

int64_t rb_quantile_sorted(const int64_t *sorted, size_t n, double q)
{
	size_t idx;

	if (q <= 0.0)
		return sorted[0];
	if (q >= 1.0)
		return sorted[n - 1];
	/* nearest rank: smallest value with at least q*n values <= it */
	idx = (size_t)ceil(q * (double)n);
	if (idx == 0)
		idx = 1;
	return sorted[idx - 1];
}

int64_t rb_outlier_bound(const int64_t *sorted, size_t n, int64_t min_margin)
{
	int64_t q1 = rb_quantile_sorted(sorted, n, 0.25);
	int64_t q3 = rb_quantile_sorted(sorted, n, 0.75);
	int64_t margin = 3 * (q3 - q1);

	if (margin < min_margin)
		margin = min_margin;
	return q3 + margin;
}

size_t rb_attribute_window(const int64_t *val, uint8_t *reason, size_t lo,
			   size_t hi, int64_t bound, uint64_t events,
			   uint8_t why)
{
	size_t marked = 0;

	while (events > 0) {
		size_t i, best = hi;

		for (i = lo; i < hi; i++) {
			if (reason[i] != RB_KEPT || val[i] <= bound)
				continue;
			if (best == hi || val[i] > val[best])
				best = i;
		}
		if (best == hi)
			break;
		reason[best] = why;
		marked++;
		events--;
	}
	return marked;
}

int64_t rb_median_kept_raw(const struct rb_run *r)
{
	int64_t *v = malloc((r->n ? r->n : 1) * sizeof(*v));
	size_t i, k = 0;
	int64_t med = 0;

	if (!v)
		return 0;
	for (i = 0; i < r->n; i++)
		if (r->reason[i] == RB_KEPT)
			v[k++] = r->raw[i];
	if (k) {
		rb_sort_i64(v, k);
		med = v[(k - 1) / 2];
	}
	free(v);
	return med;
}

void rb_result_free(struct rb_result *res)
{
	free(res->hist);
	res->hist = NULL;
}

int rb_finalize(const struct rb_run *r, const struct rb_stat_cfg *cfg,
		struct rb_result *res)
{
	size_t n = r->n, i, k, w, start;
	int64_t *val = NULL, *kept = NULL;
	uint8_t *reason = NULL;
	double sum = 0.0;
	int divisor = cfg->divisor > 0 ? cfg->divisor : 1;
	int64_t bucket = cfg->bucket_ns > 0 ? cfg->bucket_ns : 1;

	memset(res, 0, sizeof(*res));
	res->overhead = cfg->overhead;
	res->divisor = divisor;
	res->bucket_ns = bucket;
	res->hist_size = cfg->hist_size;
	res->hist = calloc(cfg->hist_size ? cfg->hist_size : 1,
			   sizeof(*res->hist));
	val = malloc((n ? n : 1) * sizeof(*val));
	kept = malloc((n ? n : 1) * sizeof(*kept));
	reason = malloc(n ? n : 1);
	if (!res->hist || !val || !kept || !reason) {
		free(val);
		free(kept);
		free(reason);
		rb_result_free(res);
		return -1;
	}
	if (n)
		memcpy(reason, r->reason, n);

	/* 1. overhead subtraction */
	for (i = 0; i < n; i++)
		val[i] = rb_value(r->raw[i], cfg->overhead, divisor);

	/* 2. outlier fence over samples not already discarded */
	for (i = 0, k = 0; i < n; i++)
		if (reason[i] == RB_KEPT)
			kept[k++] = val[i];
	if (k) {
		rb_sort_i64(kept, k);
		res->bound = rb_outlier_bound(kept, k, cfg->min_margin_ns);
	}

	/* 3. attribute counted disturbances to the outliers of their window */
	for (w = 0, start = 0; w < r->nwin; w++) {
		size_t end = r->win_end[w] < n ? r->win_end[w] : n;
		size_t pre;
		uint64_t irq_left;

		if (end <= start)
			continue;
		pre = rb_attribute_window(val, reason, start, end, res->bound,
					  r->win_csw[w], RB_PREEMPTED);
		irq_left = r->win_irq[w] > pre ? r->win_irq[w] - pre : 0;
		rb_attribute_window(val, reason, start, end, res->bound,
				    irq_left, RB_INTERRUPT);
		start = end;
	}

	/* 4. statistics over what is kept */
	res->iterations = n;
	for (i = 0, k = 0; i < n; i++) {
		int64_t v;
		uint64_t b;

		res->reasons[reason[i]]++;
		if (reason[i] != RB_KEPT)
			continue;
		v = val[i];
		if (v < 0) {
			v = 0;
			res->clamped++;
		}
		kept[k++] = v;
		if (k == 1 || v < res->min)
			res->min = v;
		if (k == 1 || v > res->max)
			res->max = v;
		sum += (double)v;
		b = (uint64_t)(v / bucket);
		if (b < cfg->hist_size)
			res->hist[b]++;
		else
			res->overflows++;
	}
	res->samples = k;
	res->discarded = n - k;
	res->reasons[RB_KEPT] = 0;	/* not a discard reason */
	if (k) {
		rb_sort_i64(kept, k);
		res->avg = sum / (double)k;
		res->median = kept[(k - 1) / 2];
		res->p99 = rb_quantile_sorted(kept, k, 0.99);
		/* guard against floating point rounding for constant data */
		if (res->avg < (double)res->min)
			res->avg = (double)res->min;
		if (res->avg > (double)res->max)
			res->avg = (double)res->max;
	}
	free(val);
	free(kept);
	free(reason);
	return 0;
}
