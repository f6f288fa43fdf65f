/* rtbench - the benchmark table. */
#ifndef RTBENCH_BENCHMARKS_H
#define RTBENCH_BENCHMARKS_H

#include <stddef.h>

#include "harness.h"

enum rb_kind {
	RB_K_CALIB,	/* timestamp overhead: null op, nothing subtracted */
	RB_K_SINGLE,
	RB_K_WAKE,
	RB_K_CTXSW_YIELD,
	RB_K_CTXSW_SEM,
	RB_K_PRIO_INV,
};

struct rb_bench {
	const char *name;
	enum rb_kind kind;
	const struct rb_single_ops *single;
	const struct rb_wake_ops *wake;
	int cross;		/* wake-up from the other CPU */
	int divisor;		/* samples are (t1 - t0 - overhead) / divisor */
	const char *method;	/* what exactly is timed (goes into JSON) */
};

extern const struct rb_bench rb_benches[];
extern const size_t rb_nbenches;

const struct rb_bench *rb_bench_find(const char *name);
/* RB_OK, RB_SKIP (reason in err) or RB_ERROR (message in err) */
int rb_bench_run(const struct rb_bench *b, const struct rb_env *env,
		 struct rb_run *run, char *err, size_t errlen);

/* the empty operation (out of line, so its call costs what any op's does) */
void rb_null_op(void *ctx);

#endif
