/* rtbench - the cost of POSIX real-time primitives, RTOS-vendor style.
 *
 * Output: JSON shaped like rt-tests 2.x (--json of cyclictest & co) with a
 * "benchmarks" object instead of "thread". See rtbench/README.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "benchmarks.h"
#include "json.h"
#include "respond.h"
#include "stats.h"
#include "sysutil.h"

#define RTBENCH_VERSION "1.0"
#define RB_MAX_WARN 16
#define RB_ERRLEN 256
#define RB_MIN_MARGIN_NS 100

struct outcome {
	int selected;
	int status;		/* RB_OK / RB_SKIP / RB_ERROR */
	char err[RB_ERRLEN];
	struct rb_result res;
	int cpu, other_cpu;
	size_t warmup;
};

static struct {
	size_t iterations;
	long warmup;		/* -1: default */
	int cpu, other_cpu;	/* -1: default */
	int prio;
	int64_t bucket_ns;
	size_t hist_size;
	size_t window;
	double duration;
	int64_t settle_us;
	int quiet;
	int list;
	int no_rt;
	int no_dma;
	int no_irq;
	const char *json_file;
	const char *select;
} opt = {
	.iterations = 10000,
	.warmup = -1,
	.cpu = -1,
	.other_cpu = -1,
	.prio = 80,
	.bucket_ns = 10,
	.hist_size = 10000,
	.window = 32,
	.settle_us = 20,
};

static const char *warnings[RB_MAX_WARN];
static int nwarn;

static void warn(const char *w)
{
	if (nwarn < RB_MAX_WARN)
		warnings[nwarn++] = strdup(w);
	if (!opt.quiet)
		fprintf(stderr, "rtbench: warning: %s\n", w);
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: rtbench [options]\n"
"  -l, --loops=N          samples per benchmark (default 10000)\n"
"  -w, --warmup=N         discarded warm-up iterations (default loops/10,\n"
"                         clamped to 10..1000)\n"
"  -D, --duration=SEC     cap on the sampling time of each benchmark\n"
"  -a, --affinity=CPU     measuring CPU (default: last allowed CPU)\n"
"  -b, --other-cpu=CPU    second CPU for cross-CPU wake-ups (default: first\n"
"                         allowed CPU other than -a)\n"
"  -p, --priority=PRIO    SCHED_FIFO priority of the highest thread, 11..99\n"
"                         (default 80; posters run at P-10, PI medium P-5)\n"
"  -t, --tests=A[,B...]   run only these benchmarks (see --list)\n"
"  -B, --bucket-ns=NS     histogram bucket width in ns (default 10)\n"
"  -H, --histogram=N      number of histogram buckets (default 10000)\n"
"  -W, --window=N         samples per disturbance-counter window (default 32)\n"
"  -s, --settle-us=US     cross-CPU: wait after the waiter is seen sleeping\n"
"                         before posting (default 20)\n"
"      --json=FILE        write JSON to FILE (default: stdout)\n"
"  -q, --quiet            no progress or summary on the terminal\n"
"      --list             print the benchmark names and exit\n"
"      --no-rt            do not try SCHED_FIFO (test the fallback)\n"
"      --no-dma-latency   do not hold /dev/cpu_dma_latency at 0\n"
"      --no-irq           do not read /proc/interrupts\n"
"  -V, --version          print the version\n"
"  -h, --help             this help\n");
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	enum { O_JSON = 256, O_LIST, O_NORT, O_NODMA, O_NOIRQ };
	static const struct option lopts[] = {
		{ "loops", required_argument, NULL, 'l' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "duration", required_argument, NULL, 'D' },
		{ "affinity", required_argument, NULL, 'a' },
		{ "other-cpu", required_argument, NULL, 'b' },
		{ "priority", required_argument, NULL, 'p' },
		{ "tests", required_argument, NULL, 't' },
		{ "bucket-ns", required_argument, NULL, 'B' },
		{ "histogram", required_argument, NULL, 'H' },
		{ "window", required_argument, NULL, 'W' },
		{ "settle-us", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", required_argument, NULL, O_JSON },
		{ "list", no_argument, NULL, O_LIST },
		{ "no-rt", no_argument, NULL, O_NORT },
		{ "no-dma-latency", no_argument, NULL, O_NODMA },
		{ "no-irq", no_argument, NULL, O_NOIRQ },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	long v;

	while ((c = getopt_long(argc, argv, "l:w:D:a:b:p:t:B:H:W:s:qVh",
				lopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (parse_long(optarg, 1, 100000000, &v))
				goto bad;
			opt.iterations = (size_t)v;
			break;
		case 'w':
			if (parse_long(optarg, 0, 100000000, &v))
				goto bad;
			opt.warmup = v;
			break;
		case 'D': {
			char *end;

			opt.duration = strtod(optarg, &end);
			if (end == optarg || *end || opt.duration < 0)
				goto bad;
			break;
		}
		case 'a':
			if (parse_long(optarg, 0, CPU_SETSIZE - 1, &v))
				goto bad;
			opt.cpu = (int)v;
			break;
		case 'b':
			if (parse_long(optarg, 0, CPU_SETSIZE - 1, &v))
				goto bad;
			opt.other_cpu = (int)v;
			break;
		case 'p':
			if (parse_long(optarg, 11, 99, &v))
				goto bad;
			opt.prio = (int)v;
			break;
		case 't':
			opt.select = optarg;
			break;
		case 'B':
			if (parse_long(optarg, 1, 1000000000, &v))
				goto bad;
			opt.bucket_ns = v;
			break;
		case 'H':
			if (parse_long(optarg, 1, 10000000, &v))
				goto bad;
			opt.hist_size = (size_t)v;
			break;
		case 'W':
			if (parse_long(optarg, 1, 1000000, &v))
				goto bad;
			opt.window = (size_t)v;
			break;
		case 's':
			if (parse_long(optarg, 0, 1000000, &v))
				goto bad;
			opt.settle_us = v;
			break;
		case 'q':
			opt.quiet = 1;
			break;
		case O_JSON:
			opt.json_file = optarg;
			break;
		case O_LIST:
			opt.list = 1;
			break;
		case O_NORT:
			opt.no_rt = 1;
			break;
		case O_NODMA:
			opt.no_dma = 1;
			break;
		case O_NOIRQ:
			opt.no_irq = 1;
			break;
		case 'V':
			printf("rtbench %s\n", RTBENCH_VERSION);
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
		continue;
bad:
		fprintf(stderr, "rtbench: invalid value for -%c: '%s'\n",
			c < 256 ? c : '-', optarg);
		return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "rtbench: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

/* mark selected benchmarks; returns -1 on an unknown name */
static int select_benches(struct outcome *out)
{
	char *copy, *tok, *save = NULL;
	size_t i;

	if (!opt.select) {
		for (i = 0; i < rb_nbenches; i++)
			out[i].selected = 1;
		return 0;
	}
	copy = strdup(opt.select);
	if (!copy)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		const struct rb_bench *b = rb_bench_find(tok);

		if (!b) {
			fprintf(stderr, "rtbench: unknown benchmark '%s' "
				"(see --list)\n", tok);
			free(copy);
			return -1;
		}
		out[b - rb_benches].selected = 1;
	}
	free(copy);
	return 0;
}

/* can the calling thread be pinned to cpu? (leaves it pinned there) */
static int cpu_usable(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0;
}

static void fmt_time(char *buf, size_t len, time_t t)
{
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%a, %d %b %Y %T %z", &tm);
}

static int read_realtime(void)
{
	FILE *f = fopen("/sys/kernel/realtime", "r");
	int v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static void write_result(struct rb_json *j, const struct rb_bench *b,
			 const struct outcome *o)
{
	const struct rb_result *r = &o->res;
	char key[32];
	size_t i;
	int k;

	rb_json_obj_begin(j, b->name);
	rb_json_int(j, "min", r->min);
	rb_json_double(j, "avg", r->avg, 2);
	rb_json_int(j, "max", r->max);
	rb_json_int(j, "median", r->median);
	rb_json_int(j, "p99", r->p99);
	rb_json_uint(j, "samples", r->samples);
	rb_json_uint(j, "discarded", r->discarded);
	rb_json_obj_begin(j, "discard_reasons");
	for (k = 1; k < RB_NREASONS; k++)
		rb_json_uint(j, rb_reason_names[k], r->reasons[k]);
	rb_json_obj_end(j);
	rb_json_uint(j, "iterations", r->iterations);
	rb_json_uint(j, "warmup", o->warmup);
	rb_json_int(j, "cpu", o->cpu);
	if (o->other_cpu >= 0)
		rb_json_int(j, "other_cpu", o->other_cpu);
	rb_json_str(j, "unit", "ns");
	rb_json_int(j, "overhead_subtracted_ns", r->overhead);
	rb_json_int(j, "divisor", r->divisor);
	rb_json_uint(j, "clamped_to_zero", r->clamped);
	rb_json_int(j, "outlier_bound_ns", r->bound);
	rb_json_str(j, "method", b->method);
	rb_json_int(j, "bucket_ns", r->bucket_ns);
	rb_json_uint(j, "histogram_size", r->hist_size);
	rb_json_uint(j, "overflows", r->overflows);
	rb_json_obj_begin(j, "histogram");
	for (i = 0; i < r->hist_size; i++) {
		if (!r->hist[i])
			continue;
		snprintf(key, sizeof(key), "%zu", i);
		rb_json_uint(j, key, r->hist[i]);
	}
	rb_json_obj_end(j);
	rb_json_obj_end(j);
}

static void write_json(FILE *f, const char *cmdline, const char *t_start,
		       const char *t_end, int rc, const struct utsname *u,
		       const struct rb_env *env, int mlocked, int dma,
		       int64_t overhead, const struct rb_result *calib,
		       const struct outcome *out)
{
	struct rb_json j;
	size_t i;
	int k;

	rb_json_init(&j, f);
	rb_json_obj_begin(&j, NULL);
	rb_json_int(&j, "file_version", 1);
	rb_json_str(&j, "cmdline:", cmdline);
	rb_json_str(&j, "rt_test_version:", RTBENCH_VERSION);
	rb_json_str(&j, "start_time", t_start);
	rb_json_str(&j, "end_time", t_end);
	rb_json_int(&j, "return_code", rc);
	rb_json_obj_begin(&j, "sysinfo");
	rb_json_str(&j, "sysname", u->sysname);
	rb_json_str(&j, "nodename", u->nodename);
	rb_json_str(&j, "release", u->release);
	rb_json_str(&j, "version", u->version);
	rb_json_str(&j, "machine", u->machine);
	rb_json_int(&j, "realtime", read_realtime());
	rb_json_obj_end(&j);

	rb_json_obj_begin(&j, "config");
	rb_json_str(&j, "tool", "rtbench");
	rb_json_uint(&j, "iterations", env->iterations);
	rb_json_uint(&j, "warmup", env->warmup);
	rb_json_double(&j, "duration_cap_s", opt.duration, 3);
	rb_json_int(&j, "cpu", env->cpu);
	if (env->other_cpu >= 0)
		rb_json_int(&j, "other_cpu", env->other_cpu);
	else
		rb_json_null(&j, "other_cpu");
	rb_json_str(&j, "policy", env->rt ? "SCHED_FIFO" : "SCHED_OTHER");
	rb_json_int(&j, "priority", env->rt ? env->prio : 0);
	rb_json_bool(&j, "mlockall", mlocked);
	if (dma)
		rb_json_int(&j, "cpu_dma_latency_us", 0);
	else
		rb_json_null(&j, "cpu_dma_latency_us");
	rb_json_str(&j, "clock", "CLOCK_MONOTONIC");
	{
		struct timespec res;

		clock_getres(CLOCK_MONOTONIC, &res);
		rb_json_int(&j, "clock_resolution_ns",
			    (int64_t)res.tv_sec * RB_NSEC_PER_SEC + res.tv_nsec);
	}
	rb_json_uint(&j, "window_samples", env->window);
	rb_json_int(&j, "settle_us", env->settle_ns / 1000);
	rb_json_int(&j, "bucket_ns", opt.bucket_ns);
	rb_json_uint(&j, "histogram_size", opt.hist_size);
	rb_json_obj_end(&j);

	rb_json_obj_begin(&j, "timestamp_overhead");
	rb_json_int(&j, "subtracted_ns", overhead);
	rb_json_str(&j, "method", "median");
	rb_json_int(&j, "min_ns", calib->min);
	rb_json_int(&j, "median_ns", calib->median);
	rb_json_double(&j, "avg_ns", calib->avg, 2);
	rb_json_str(&j, "justification",
		    "The median of the calibration run (the clock_gettime "
		    "benchmark: the same harness around an empty call) is the "
		    "expected overhead in a sample, robust to the interrupts "
		    "that inflate a mean; the minimum is a best case that "
		    "under-subtracts typical samples by the clock's jitter "
		    "(median - min), biasing every fast operation upward and "
		    "making the null benchmark read > 0. Samples that come out "
		    "negative after subtraction are clamped to 0 and counted "
		    "(clamped_to_zero).");
	rb_json_obj_end(&j);

	rb_json_obj_begin(&j, "disturbance_detection");
	rb_json_str(&j, "migration",
		    "exact, per sample: sched_getcpu() of every measured "
		    "thread before and after differs, or is not its pinned "
		    "CPU");
	rb_json_str(&j, "preempted",
		    "per window: involuntary context switches "
		    "(getrusage(RUSAGE_THREAD) ru_nivcsw) of the threads that "
		    "must not be preempted (the single-thread measurer, wake-up "
		    "waiters, cross-CPU posters, the PI high thread); each is "
		    "attributed to the largest sample of its window above the "
		    "outlier bound");
	rb_json_str(&j, "interrupt",
		    env->use_irq ?
		    "per window: increase of the involved CPUs' totals in "
		    "/proc/interrupts, excluding rescheduling IPIs (part of a "
		    "cross-CPU wake-up) and interrupts already explained by a "
		    "preemption; attributed like preempted. Windows are "
		    "window_samples samples, except cross-CPU wake-ups where "
		    "the counters are read right before t0 and right after t1 "
		    "(one-sample windows)" :
		    "disabled (/proc/interrupts unavailable or --no-irq)");
	rb_json_str(&j, "not_blocked",
		    "exact, per sample: a wake-up or PI waiter whose ru_nvcsw "
		    "did not change, i.e. it never slept");
	rb_json_str(&j, "no_switch",
		    "exact, per sample: context_switch* partner did not run");
	rb_json_str(&j, "outlier_bound",
		    "Q3 + max(3*IQR, 100 ns) of the benchmark's samples; "
		    "samples at or below it are never discarded");
	rb_json_obj_end(&j);

	rb_json_arr_begin(&j, "warnings");
	for (k = 0; k < nwarn; k++)
		rb_json_str(&j, NULL, warnings[k]);
	rb_json_arr_end(&j);

	rb_json_obj_begin(&j, "benchmarks");
	for (i = 0; i < rb_nbenches; i++)
		if (out[i].selected && out[i].status == RB_OK)
			write_result(&j, &rb_benches[i], &out[i]);
	rb_json_obj_end(&j);

	rb_json_obj_begin(&j, "skipped");
	for (i = 0; i < rb_nbenches; i++) {
		char reason[RB_ERRLEN + 16];

		if (!out[i].selected || out[i].status == RB_OK)
			continue;
		snprintf(reason, sizeof(reason), "%s%s",
			 out[i].status == RB_ERROR ? "error: " : "",
			 out[i].err);
		rb_json_str(&j, rb_benches[i].name, reason);
	}
	rb_json_obj_end(&j);
	rb_json_obj_end(&j);
}

static void print_summary(FILE *f, const struct outcome *out,
			  int64_t overhead)
{
	size_t i;

	fprintf(f, "rtbench: timestamp overhead subtracted: %lld ns\n",
		(long long)overhead);
	fprintf(f, "%-26s %9s %11s %9s %9s %9s %8s %6s\n", "benchmark",
		"min", "avg", "max", "median", "p99", "samples", "disc");
	for (i = 0; i < rb_nbenches; i++) {
		const struct outcome *o = &out[i];

		if (!o->selected)
			continue;
		if (o->status != RB_OK) {
			fprintf(f, "%-26s %s%s\n", rb_benches[i].name,
				o->status == RB_ERROR ? "ERROR: " :
				"skipped: ", o->err);
			continue;
		}
		fprintf(f, "%-26s %9lld %11.2f %9lld %9lld %9lld %8llu %6llu\n",
			rb_benches[i].name, (long long)o->res.min, o->res.avg,
			(long long)o->res.max, (long long)o->res.median,
			(long long)o->res.p99,
			(unsigned long long)o->res.samples,
			(unsigned long long)o->res.discarded);
	}
}

static int run_one(const struct rb_bench *b, const struct rb_env *env,
		   int64_t overhead, struct outcome *o)
{
	struct rb_run run;
	struct rb_stat_cfg sc = {
		.overhead = overhead,
		.divisor = b->divisor,
		.bucket_ns = opt.bucket_ns,
		.hist_size = opt.hist_size,
		.min_margin_ns = RB_MIN_MARGIN_NS,
	};

	o->cpu = env->cpu;
	o->other_cpu = (b->kind == RB_K_WAKE && b->cross) ? env->other_cpu : -1;
	o->warmup = env->warmup;
	if (rb_run_init(&run, env->iterations)) {
		snprintf(o->err, sizeof(o->err), "cannot allocate sample "
			 "buffers (RLIMIT_MEMLOCK under mlockall?)");
		return o->status = RB_ERROR;
	}
	o->status = rb_bench_run(b, env, &run, o->err, sizeof(o->err));
	if (o->status == RB_OK) {
		if (run.n == 0) {
			snprintf(o->err, sizeof(o->err),
				 "no sample taken (duration cap too short?)");
			o->status = RB_ERROR;
		} else if (rb_finalize(&run, &sc, &o->res)) {
			snprintf(o->err, sizeof(o->err), "out of memory");
			o->status = RB_ERROR;
		}
	}
	rb_run_free(&run);
	return o->status;
}

int main(int argc, char **argv)
{
	static struct outcome out[64];
	struct rb_env env;
	struct utsname u;
	char t_start[64], t_end[64], *cmdline;
	size_t len = 1, i;
	int cpus[CPU_SETSIZE], ncpu, rc = 0, mlocked = 0, dma_fd = -1, k;
	int64_t overhead;
	struct outcome calib;
	FILE *jf = stdout, *human;

	if (argc > 1 && !strcmp(argv[1], "respond"))	/* the interrupt-response responder */
		return rb_respond_main(argc - 1, argv + 1);
	if (parse_args(argc, argv))
		return 2;
	if (opt.list) {
		for (i = 0; i < rb_nbenches; i++)
			printf("%s\n", rb_benches[i].name);
		return 0;
	}
	if (rb_nbenches > sizeof(out) / sizeof(out[0]) || select_benches(out))
		return 2;
	for (k = 0; k < argc; k++)
		len += strlen(argv[k]) + 1;
	cmdline = calloc(1, len);
	for (k = 0; k < argc; k++) {
		if (k)
			strcat(cmdline, " ");
		strcat(cmdline, argv[k]);
	}
	if (opt.json_file) {
		jf = fopen(opt.json_file, "w");
		if (!jf) {
			fprintf(stderr, "rtbench: %s: %s\n", opt.json_file,
				strerror(errno));
			return 2;
		}
	}
	human = opt.json_file ? stdout : stderr;
	fmt_time(t_start, sizeof(t_start), time(NULL));
	uname(&u);

	/* ---- environment ---- */
	memset(&env, 0, sizeof(env));
	ncpu = rb_allowed_cpus(cpus, CPU_SETSIZE);
	if (ncpu <= 0) {
		fprintf(stderr, "rtbench: cannot read the CPU affinity\n");
		return 2;
	}
	/* explicit -a/-b may name CPUs outside the inherited mask (isolcpus) */
	env.cpu = opt.cpu >= 0 ? opt.cpu : cpus[ncpu - 1];
	env.other_cpu = -1;
	if (opt.cpu >= 0 && !cpu_usable(opt.cpu)) {
		fprintf(stderr, "rtbench: -a %d: cannot run on this CPU\n",
			opt.cpu);
		return 2;
	}
	if (opt.other_cpu >= 0) {
		if (!cpu_usable(opt.other_cpu)) {
			fprintf(stderr, "rtbench: -b %d: cannot run on this "
				"CPU\n", opt.other_cpu);
			return 2;
		}
		if (opt.other_cpu == env.cpu)
			env.no_other_reason = "other CPU (-b) equals the "
					      "measuring CPU (-a)";
		else
			env.other_cpu = opt.other_cpu;
	} else {
		for (k = 0; k < ncpu; k++)
			if (cpus[k] != env.cpu) {
				env.other_cpu = cpus[k];
				break;
			}
		if (env.other_cpu < 0)
			env.no_other_reason = "only one CPU is available to "
					      "this process: cross-CPU "
					      "wake-up not run";
	}
	env.iterations = opt.iterations;
	if (opt.warmup >= 0) {
		env.warmup = (size_t)opt.warmup;
	} else {
		env.warmup = opt.iterations / 10;
		if (env.warmup < 10)
			env.warmup = 10;
		if (env.warmup > 1000)
			env.warmup = 1000;
	}
	env.window = opt.window;
	env.cap_ns = (int64_t)(opt.duration * 1e9);
	env.settle_ns = opt.settle_us * 1000;
	env.timeout_ns = 5 * RB_NSEC_PER_SEC;
	env.prio = opt.prio;

	if (env.no_other_reason)
		warn(env.no_other_reason);
	if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
		mlocked = 1;
	} else {
		char w[160];

		snprintf(w, sizeof(w), "mlockall failed (%s): page faults may "
			 "land in samples", strerror(errno));
		warn(w);
	}
	rb_prefault_stack(64 * 1024);
	if (!opt.no_rt) {
		struct rb_sched s = { SCHED_FIFO, env.prio, env.cpu };
		int e = rb_sched_self(&s);

		env.rt = e == 0;
		if (e) {
			char w[200];

			snprintf(w, sizeof(w), "SCHED_FIFO not permitted (%s): "
				 "running SCHED_OTHER, numbers are not "
				 "real-time representative; context_switch and "
				 "prio_inversion_pi skipped", strerror(e));
			warn(w);
		}
	} else {
		warn("--no-rt: running SCHED_OTHER; context_switch and "
		     "prio_inversion_pi skipped");
	}
	if (!opt.no_dma) {
		dma_fd = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC);
		if (dma_fd >= 0) {
			int32_t zero = 0;

			if (write(dma_fd, &zero, sizeof(zero)) != sizeof(zero)) {
				close(dma_fd);
				dma_fd = -1;
			}
		}
		if (dma_fd < 0)
			warn("/dev/cpu_dma_latency not writable: CPU idle "
			     "states not restricted");
	}
	if (!opt.no_irq) {
		struct rb_irq irq;
		uint64_t t;
		int want[2] = { env.cpu, env.other_cpu };

		if (rb_irq_open(&irq) == 0) {
			env.use_irq = rb_irq_read(&irq, want,
						  env.other_cpu >= 0 ? 2 : 1,
						  &t) == 0;
			rb_irq_close(&irq);
		}
		if (!env.use_irq)
			warn("/proc/interrupts unreadable: interrupts are not "
			     "detected");
	}

	/* ---- calibration: the timestamp overhead ---- */
	{
		const struct rb_bench *cb = rb_bench_find("clock_gettime");
		struct rb_run run;
		struct rb_stat_cfg sc = {
			.overhead = 0, .divisor = 1,
			.bucket_ns = opt.bucket_ns,
			.hist_size = opt.hist_size,
			.min_margin_ns = RB_MIN_MARGIN_NS,
		};

		memset(&calib, 0, sizeof(calib));
		if (!opt.quiet)
			fprintf(stderr, "rtbench: calibrating timestamp overhead\n");
		if (rb_run_init(&run, env.iterations) ||
		    rb_bench_run(cb, &env, &run, calib.err,
				 sizeof(calib.err)) != RB_OK ||
		    run.n == 0 || rb_finalize(&run, &sc, &calib.res)) {
			fprintf(stderr, "rtbench: calibration failed: %s\n",
				calib.err);
			return 2;
		}
		/* median of the samples kept after disturbance attribution */
		overhead = calib.res.median;
		calib.status = RB_OK;
		calib.cpu = env.cpu;
		calib.other_cpu = -1;
		calib.warmup = env.warmup;
		rb_run_free(&run);
	}

	/* ---- benchmarks ---- */
	for (i = 0; i < rb_nbenches; i++) {
		const struct rb_bench *b = &rb_benches[i];

		if (!out[i].selected)
			continue;
		if (b->kind == RB_K_CALIB) {
			out[i] = calib;
			out[i].selected = 1;
			continue;
		}
		if (!opt.quiet)
			fprintf(stderr, "rtbench: %s\n", b->name);
		rb_sleep_ns(10 * 1000000LL);	/* settle, RT-throttle guard */
		if (run_one(b, &env, overhead, &out[i]) == RB_ERROR)
			rc = 1;
	}

	fmt_time(t_end, sizeof(t_end), time(NULL));
	write_json(jf, cmdline, t_start, t_end, rc, &u, &env, mlocked,
		   dma_fd >= 0, overhead, &calib.res, out);
	if (jf != stdout)
		fclose(jf);
	else
		fflush(stdout);
	if (!opt.quiet)
		print_summary(human, out, overhead);
	if (dma_fd >= 0)
		close(dma_fd);
	return rc;
}
