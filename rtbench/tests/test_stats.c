/* rtbench unit tests: statistics, disturbance accounting, parsers, JSON.
 * Built and run under -fsanitize=address,undefined by `make check`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "stats.h"
#include "sysutil.h"

static int passed, failed;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (cond) {                                                \
			passed++;                                          \
		} else {                                                   \
			failed++;                                          \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__,   \
				__LINE__, #cond);                          \
		}                                                          \
	} while (0)

#define CHECK_EQ(a, b)                                                     \
	do {                                                               \
		long long a_ = (long long)(a), b_ = (long long)(b);        \
		if (a_ == b_) {                                            \
			passed++;                                          \
		} else {                                                   \
			failed++;                                          \
			fprintf(stderr, "%s:%d: FAILED: %s == %s (%lld != %lld)\n", \
				__FILE__, __LINE__, #a, #b, a_, b_);       \
		}                                                          \
	} while (0)

static struct rb_stat_cfg cfg(int64_t overhead, int divisor, int64_t bucket,
			      size_t size)
{
	struct rb_stat_cfg c = {
		.overhead = overhead, .divisor = divisor, .bucket_ns = bucket,
		.hist_size = size, .min_margin_ns = 100,
	};
	return c;
}

static uint64_t hist_sum(const struct rb_result *r)
{
	uint64_t s = 0;
	size_t i;

	for (i = 0; i < r->hist_size; i++)
		s += r->hist[i];
	return s;
}

static uint64_t reasons_sum(const struct rb_result *r)
{
	uint64_t s = 0;
	int k;

	for (k = 1; k < RB_NREASONS; k++)
		s += r->reasons[k];
	return s;
}

static void test_value(void)
{
	CHECK_EQ(rb_value(120, 20, 1), 100);
	CHECK_EQ(rb_value(10, 20, 1), -10);
	CHECK_EQ(rb_value(121, 20, 2), 51);	/* 50.5 rounds away from 0 */
	CHECK_EQ(rb_value(120, 20, 2), 50);
	CHECK_EQ(rb_value(119, 20, 2), 50);	/* 49.5 -> 50 */
	CHECK_EQ(rb_value(100, 0, 0), 100);	/* divisor <= 1: none */
}

static void test_quantiles(void)
{
	int64_t v[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

	CHECK_EQ(rb_quantile_sorted(v, 10, 0.0), 1);
	CHECK_EQ(rb_quantile_sorted(v, 10, 0.25), 3);
	CHECK_EQ(rb_quantile_sorted(v, 10, 0.5), 5);
	CHECK_EQ(rb_quantile_sorted(v, 10, 0.75), 8);
	CHECK_EQ(rb_quantile_sorted(v, 10, 0.99), 10);
	CHECK_EQ(rb_quantile_sorted(v, 10, 1.0), 10);
	CHECK_EQ(rb_quantile_sorted(v, 1, 0.5), 1);
	/* fence: Q3 + max(3*IQR, margin) */
	CHECK_EQ(rb_outlier_bound(v, 10, 0), 8 + 3 * 5);
	CHECK_EQ(rb_outlier_bound(v, 10, 100), 8 + 100);
}

static void test_basic(void)
{
	struct rb_run run;
	struct rb_result res;
	struct rb_stat_cfg c = cfg(20, 1, 10, 100);
	int i;

	CHECK_EQ(rb_run_init(&run, 10), 0);
	for (i = 0; i < 10; i++)
		rb_run_add(&run, 100 + i, RB_KEPT);
	rb_run_add(&run, 999, RB_KEPT);	/* beyond capacity: ignored */
	CHECK_EQ(run.n, 10);
	CHECK_EQ(rb_run_close_window(&run, 0, 0), 0);
	CHECK_EQ(rb_finalize(&run, &c, &res), 0);
	CHECK_EQ(res.iterations, 10);
	CHECK_EQ(res.samples, 10);
	CHECK_EQ(res.discarded, 0);
	CHECK_EQ(res.min, 80);
	CHECK_EQ(res.max, 89);
	CHECK(res.avg > 84.49 && res.avg < 84.51);
	CHECK_EQ(res.median, 84);
	CHECK_EQ(res.p99, 89);
	CHECK_EQ(res.overhead, 20);
	CHECK_EQ(res.hist[8], 10);
	CHECK_EQ(hist_sum(&res), 10);
	CHECK_EQ(res.overflows, 0);
	CHECK_EQ(res.clamped, 0);
	rb_result_free(&res);
	rb_run_free(&run);
}

static void test_histogram_overflow(void)
{
	struct rb_run run;
	struct rb_result res;
	struct rb_stat_cfg c = cfg(0, 1, 10, 5);
	int i;

	rb_run_init(&run, 100);
	for (i = 0; i < 100; i++)
		rb_run_add(&run, i, RB_KEPT);
	rb_finalize(&run, &c, &res);
	for (i = 0; i < 5; i++)
		CHECK_EQ(res.hist[i], 10);
	CHECK_EQ(res.overflows, 50);
	CHECK_EQ(hist_sum(&res) + res.overflows, res.samples);
	CHECK_EQ(res.bucket_ns, 10);
	CHECK_EQ(res.hist_size, 5);
	rb_result_free(&res);
	rb_run_free(&run);

	/* 1 ns buckets: exact values, value == size overflows */
	c = cfg(0, 1, 1, 4);
	rb_run_init(&run, 5);
	for (i = 0; i < 5; i++)
		rb_run_add(&run, i, RB_KEPT);
	rb_finalize(&run, &c, &res);
	CHECK_EQ(res.hist[0], 1);
	CHECK_EQ(res.hist[3], 1);
	CHECK_EQ(res.overflows, 1);
	rb_result_free(&res);
	rb_run_free(&run);
}

static void test_clamp(void)
{
	struct rb_run run;
	struct rb_result res;
	struct rb_stat_cfg c = cfg(22, 1, 1, 100);
	int64_t raw[] = { 20, 21, 22, 23, 24 };
	int i;

	rb_run_init(&run, 5);
	for (i = 0; i < 5; i++)
		rb_run_add(&run, raw[i], RB_KEPT);
	rb_finalize(&run, &c, &res);
	CHECK_EQ(res.clamped, 2);
	CHECK_EQ(res.min, 0);
	CHECK_EQ(res.max, 2);
	CHECK_EQ(res.median, 0);
	CHECK_EQ(res.hist[0], 3);	/* -2, -1 clamped + 0 */
	CHECK(res.avg > 0.59 && res.avg < 0.61);	/* (0+0+0+1+2)/5 */
	rb_result_free(&res);
	rb_run_free(&run);
}

static void test_exact_discards(void)
{
	struct rb_run run;
	struct rb_result res;
	struct rb_stat_cfg c = cfg(0, 1, 10, 1000);
	int i;

	rb_run_init(&run, 20);
	for (i = 0; i < 20; i++) {
		uint8_t why = RB_KEPT;

		if (i == 3)
			why = RB_MIGRATION;
		if (i == 7 || i == 8)
			why = RB_NOT_BLOCKED;
		if (i == 9)
			why = RB_NO_SWITCH;
		/* the discarded ones carry absurd values: must not leak in */
		rb_run_add(&run, why ? 1000000 : 50, why);
	}
	rb_finalize(&run, &c, &res);
	CHECK_EQ(res.iterations, 20);
	CHECK_EQ(res.samples, 16);
	CHECK_EQ(res.discarded, 4);
	CHECK_EQ(res.reasons[RB_MIGRATION], 1);
	CHECK_EQ(res.reasons[RB_NOT_BLOCKED], 2);
	CHECK_EQ(res.reasons[RB_NO_SWITCH], 1);
	CHECK_EQ(res.reasons[RB_KEPT], 0);
	CHECK_EQ(reasons_sum(&res), res.discarded);
	CHECK_EQ(res.samples + res.discarded, res.iterations);
	CHECK_EQ(res.max, 50);
	CHECK_EQ(res.overflows, 0);
	rb_result_free(&res);
	rb_run_free(&run);

	/* everything discarded: zero samples, still consistent */
	rb_run_init(&run, 3);
	for (i = 0; i < 3; i++)
		rb_run_add(&run, 10, RB_MIGRATION);
	rb_finalize(&run, &c, &res);
	CHECK_EQ(res.samples, 0);
	CHECK_EQ(res.discarded, 3);
	CHECK_EQ(res.min, 0);
	CHECK_EQ(res.max, 0);
	CHECK(res.avg == 0.0);
	rb_result_free(&res);
	rb_run_free(&run);
}

/* windows of 10 samples at ~100 ns with planted outliers */
static void fill_windows(struct rb_run *run, int nwin, const int64_t *spike,
			 const uint64_t *irq, const uint64_t *csw)
{
	int w, i;

	for (w = 0; w < nwin; w++) {
		for (i = 0; i < 10; i++) {
			int64_t v = 100 + (i % 3);

			if (i == 5 && spike[w])
				v = spike[w];
			if (i == 6 && spike[w] > 5000)
				v = 2000;	/* a second, smaller outlier */
			rb_run_add(run, v, RB_KEPT);
		}
		rb_run_close_window(run, irq[w], csw[w]);
	}
}

static void test_attribution(void)
{
	struct rb_run run;
	struct rb_result res;
	struct rb_stat_cfg c = cfg(0, 1, 10, 10000);
	/* w0: outlier + 1 irq            -> 1 interrupt
	 * w1: outlier + no event         -> kept (a real long sample)
	 * w2: no outlier + 3 irqs        -> nothing (irq between samples)
	 * w3: outlier + csw 1 + irq 1    -> 1 preempted, irq explained
	 * w4: 2 outliers + irq 5         -> both, largest first
	 * w5: outlier + csw 2, irq 0     -> 1 preempted (only one outlier) */
	int64_t spike[] = { 5000, 4000, 0, 3000, 9000, 3500 };
	uint64_t irq[] = { 1, 0, 3, 1, 5, 0 };
	uint64_t csw[] = { 0, 0, 0, 1, 0, 2 };

	rb_run_init(&run, 60);
	fill_windows(&run, 6, spike, irq, csw);
	CHECK_EQ(run.nwin, 6);
	rb_finalize(&run, &c, &res);
	CHECK_EQ(res.bound, 102 + 100);	/* Q3 = 102, IQR small: margin */
	CHECK_EQ(res.reasons[RB_INTERRUPT], 1 + 2);
	CHECK_EQ(res.reasons[RB_PREEMPTED], 1 + 1);
	CHECK_EQ(res.discarded, 5);
	CHECK_EQ(res.samples, 55);
	CHECK_EQ(res.max, 4000);	/* w1's spike is kept */
	CHECK_EQ(res.samples + res.discarded, res.iterations);
	CHECK_EQ(hist_sum(&res) + res.overflows, res.samples);
	rb_result_free(&res);
	rb_run_free(&run);
}

static void test_attribute_window(void)
{
	int64_t val[] = { 10, 500, 300, 20, 400 };
	uint8_t why[5] = { 0 };

	CHECK_EQ(rb_attribute_window(val, why, 0, 5, 100, 2, RB_INTERRUPT), 2);
	CHECK_EQ(why[1], RB_INTERRUPT);	/* the two largest */
	CHECK_EQ(why[4], RB_INTERRUPT);
	CHECK_EQ(why[2], RB_KEPT);
	CHECK_EQ(rb_attribute_window(val, why, 0, 5, 100, 5, RB_PREEMPTED), 1);
	CHECK_EQ(why[2], RB_PREEMPTED);
	CHECK_EQ(rb_attribute_window(val, why, 0, 5, 100, 5, RB_PREEMPTED), 0);
	CHECK_EQ(why[0], RB_KEPT);
	CHECK_EQ(why[3], RB_KEPT);
}

static void test_windows_grow(void)
{
	struct rb_run run;
	int i;

	rb_run_init(&run, 1000);
	CHECK_EQ(rb_run_close_window(&run, 5, 5), 0);	/* empty: ignored */
	CHECK_EQ(run.nwin, 0);
	for (i = 0; i < 1000; i++) {
		rb_run_add(&run, 1, RB_KEPT);
		if (i % 3 == 2)
			rb_run_close_window(&run, 0, 0);
	}
	rb_run_close_window(&run, 0, 0);
	CHECK_EQ(run.nwin, 334);
	CHECK_EQ(run.win_end[run.nwin - 1], 1000);
	CHECK_EQ(run.win_end[0], 3);
	rb_run_free(&run);
}

static void test_divisor_and_median_raw(void)
{
	struct rb_run run;
	struct rb_result res;
	struct rb_stat_cfg c = cfg(20, 2, 1, 1000);
	int64_t raw[] = { 220, 240, 260, 9999 };
	int i;

	rb_run_init(&run, 4);
	for (i = 0; i < 4; i++)
		rb_run_add(&run, raw[i], i == 3 ? RB_MIGRATION : RB_KEPT);
	CHECK_EQ(rb_median_kept_raw(&run), 240);
	rb_finalize(&run, &c, &res);
	CHECK_EQ(res.min, 100);
	CHECK_EQ(res.median, 110);
	CHECK_EQ(res.max, 120);
	CHECK_EQ(res.divisor, 2);
	rb_result_free(&res);
	rb_run_free(&run);
}

static void test_constant(void)
{
	struct rb_run run;
	struct rb_result res;
	struct rb_stat_cfg c = cfg(0, 1, 10, 100);
	int i;

	rb_run_init(&run, 1000);
	for (i = 0; i < 1000; i++)
		rb_run_add(&run, 33, RB_KEPT);
	rb_finalize(&run, &c, &res);
	CHECK(res.min <= res.avg && res.avg <= res.max);
	CHECK_EQ(res.min, 33);
	CHECK_EQ(res.max, 33);
	CHECK_EQ(res.hist[3], 1000);
	rb_result_free(&res);
	rb_run_free(&run);
}

static const char irq_x86[] =
	"           CPU0       CPU1       \n"
	"  0:         10          0   IO-APIC   2-edge      timer\n"
	" 36:          0      63469 PCI-MSIX-0000:00:02.0   1-edge  virtio1\n"
	"NMI:          1          2   Non-maskable interrupts\n"
	"LOC:      27462      32999   Local timer interrupts\n"
	"RES:       7303       5981   Rescheduling interrupts\n"
	"CAL:        100        200   Function call interrupts\n"
	"ERR:          7\n"
	"MIS:          9\n";

static const char irq_arm64[] =
	"           CPU0       CPU1       CPU2       CPU3\n"
	" 11:       1000       2000       3000       4000     GICv3  27 Level     arch_timer\n"
	"IPI0:        50         60         70         80       Rescheduling interrupts\n"
	"IPI1:         1          2          3          4       Function call interrupts\n"
	"Err:          0\n";

/* offline CPU1: columns are CPU0, CPU2 */
static const char irq_offline[] =
	"           CPU0       CPU2\n"
	"LOC:          5          7   Local timer interrupts\n";

static void test_irq_parse(void)
{
	uint64_t t = 0;
	int c0[] = { 0 }, c1[] = { 1 }, c01[] = { 0, 1 }, c3[] = { 3 },
	    c2[] = { 2 }, c9[] = { 9 };

	CHECK_EQ(rb_irq_parse(irq_x86, c0, 1, &t), 0);
	CHECK_EQ(t, 10 + 0 + 1 + 27462 + 100);
	CHECK_EQ(rb_irq_parse(irq_x86, c1, 1, &t), 0);
	CHECK_EQ(t, 63469 + 2 + 32999 + 200);
	CHECK_EQ(rb_irq_parse(irq_x86, c01, 2, &t), 0);
	CHECK_EQ(t, 10 + 63469 + 3 + 27462 + 32999 + 300);
	CHECK_EQ(rb_irq_parse(irq_arm64, c3, 1, &t), 0);
	CHECK_EQ(t, 4000 + 4);
	CHECK_EQ(rb_irq_parse(irq_offline, c2, 1, &t), 0);
	CHECK_EQ(t, 7);
	CHECK_EQ(rb_irq_parse(irq_offline, c1, 1, &t), -1);
	CHECK_EQ(rb_irq_parse(irq_x86, c9, 1, &t), -1);
	CHECK_EQ(rb_irq_parse("garbage\n", c0, 1, &t), -1);
	CHECK_EQ(rb_irq_parse("", c0, 1, &t), -1);
}

static void test_taskstat_parse(void)
{
	CHECK_EQ(rb_taskstat_parse("123 (rtbench) S 1 2 3"), 'S');
	CHECK_EQ(rb_taskstat_parse("123 (a) b) R 1 2 3"), 'R');
	CHECK_EQ(rb_taskstat_parse("123 (x"), 0);
	CHECK_EQ(rb_taskstat_parse("123 (x)"), 0);
}

static void test_json(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct rb_json j;

	rb_json_init(&j, f);
	rb_json_obj_begin(&j, NULL);
	rb_json_int(&j, "a", -3);
	rb_json_str(&j, "cmdline:", "x \"q\" \\ \n\x01");
	rb_json_obj_begin(&j, "empty");
	rb_json_obj_end(&j);
	rb_json_arr_begin(&j, "l");
	rb_json_uint(&j, NULL, 1);
	rb_json_double(&j, NULL, 2.5, 2);
	rb_json_arr_end(&j);
	rb_json_obj_end(&j);
	fclose(f);
	CHECK(strcmp(buf,
		     "{\n"
		     "  \"a\": -3,\n"
		     "  \"cmdline:\": \"x \\\"q\\\" \\\\ \\n\\u0001\",\n"
		     "  \"empty\": {},\n"
		     "  \"l\": [\n"
		     "    1,\n"
		     "    2.50\n"
		     "  ]\n"
		     "}\n") == 0);
	free(buf);
}

int main(void)
{
	test_value();
	test_quantiles();
	test_basic();
	test_histogram_overflow();
	test_clamp();
	test_exact_discards();
	test_attribution();
	test_attribute_window();
	test_windows_grow();
	test_divisor_and_median_raw();
	test_constant();
	test_irq_parse();
	test_taskstat_parse();
	test_json();
	printf("test_stats: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
