/* rtbench: an empty operation must measure ~0 after overhead subtraction.
 *
 * Runs the real harness in-process (SCHED_OTHER, pinned to the current CPU,
 * /proc/interrupts on): calibration (clock_gettime benchmark), then the
 * null benchmark, and checks the signed median of (raw - overhead) is
 * within RB_NULL_TOL_NS of 0. Timing on a shared machine is noisy, so it
 * retries a few times and passes if one attempt is within tolerance.
 * Also checks the harness bookkeeping on a real operation. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmarks.h"
#include "stats.h"

#define RB_NULL_TOL_NS 5
#define ATTEMPTS 5

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

static struct rb_env test_env(size_t n)
{
	struct rb_env env;

	memset(&env, 0, sizeof(env));
	env.rt = 0;
	env.cpu = sched_getcpu();
	env.other_cpu = -1;
	env.iterations = n;
	env.warmup = 1000;
	env.window = 32;
	env.timeout_ns = 5000000000LL;
	env.use_irq = 1;
	return env;
}

static int run_bench(const char *name, const struct rb_env *env,
		     struct rb_run *run)
{
	char err[256];
	int r;

	if (rb_run_init(run, env->iterations))
		return -1;
	r = rb_bench_run(rb_bench_find(name), env, run, err, sizeof(err));
	if (r != RB_OK)
		fprintf(stderr, "%s: %s\n", name, err);
	return r == RB_OK ? 0 : -1;
}

static int64_t signed_median(const struct rb_run *run, int64_t overhead)
{
	int64_t *v = malloc(run->n * sizeof(*v));
	size_t i, k = 0;
	int64_t m;

	for (i = 0; i < run->n; i++)
		if (run->reason[i] == RB_KEPT)
			v[k++] = run->raw[i] - overhead;
	rb_sort_i64(v, k);
	m = k ? v[(k - 1) / 2] : INT64_MAX;
	free(v);
	return m;
}

static void test_null(void)
{
	struct rb_env env = test_env(20000);
	int attempt, ok = 0;

	for (attempt = 0; attempt < ATTEMPTS && !ok; attempt++) {
		struct rb_run cal, nul;
		int64_t overhead, med;

		if (run_bench("clock_gettime", &env, &cal)) {
			CHECK(!"calibration ran");
			return;
		}
		overhead = rb_median_kept_raw(&cal);
		if (run_bench("null", &env, &nul)) {
			CHECK(!"null ran");
			rb_run_free(&cal);
			return;
		}
		med = signed_median(&nul, overhead);
		printf("attempt %d: overhead %lld ns, null median %+lld ns\n",
		       attempt + 1, (long long)overhead, (long long)med);
		ok = med >= -RB_NULL_TOL_NS && med <= RB_NULL_TOL_NS;
		CHECK(overhead > 0);
		rb_run_free(&cal);
		rb_run_free(&nul);
	}
	CHECK(ok);
}

/* a real op through the same path: bookkeeping consistent, cost > null */
static void test_harness_bookkeeping(void)
{
	struct rb_env env = test_env(3000);
	struct rb_stat_cfg sc = { .overhead = 0, .divisor = 1, .bucket_ns = 10,
				  .hist_size = 1000, .min_margin_ns = 100 };
	struct rb_run run;
	struct rb_result res;
	uint64_t h = 0;
	size_t i;

	env.warmup = 10;
	CHECK(run_bench("sem_post_wait_pair", &env, &run) == 0);
	CHECK(run.n == 3000);
	CHECK(run.nwin == (3000 + 31) / 32);
	CHECK(run.win_end[run.nwin - 1] == run.n);
	CHECK(rb_finalize(&run, &sc, &res) == 0);
	CHECK(res.samples + res.discarded == res.iterations);
	for (i = 0; i < res.hist_size; i++)
		h += res.hist[i];
	CHECK(h + res.overflows == res.samples);
	CHECK(res.min <= res.avg && res.avg <= res.max);
	CHECK(res.min > 0);
	rb_result_free(&res);
	rb_run_free(&run);

	/* duration cap stops early, still consistent */
	env.iterations = 2000000;
	env.cap_ns = 20000000;	/* 20 ms */
	CHECK(run_bench("null", &env, &run) == 0);
	CHECK(run.n > 0 && run.n < env.iterations);
	rb_run_free(&run);
}

int main(void)
{
	test_null();
	test_harness_bookkeeping();
	printf("test_null: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
