/* rtbench respond - the board side of the interrupt-response test.
 *
 * An external probe (rtlab/lab/irqprotocol.py) raises a stimulus the board
 * takes as an interrupt and times the board's answer. This is the answering
 * side, on a tty (the RX interrupt of a UART is the stimulus, a byte written
 * back the answer):
 *
 *   user path (default): this process, SCHED_FIFO, memory locked, pinned,
 *     blocks in read(); each byte it gets it writes back at once. Measured:
 *     IRQ -> tty flip buffer -> wake-up of this thread -> write -> TX.
 *   kernel path (--kernel-echo): the tty's own ECHO (n_tty, in the kworker
 *     that pushes the flip buffer) writes each byte back; this process only
 *     keeps the tty open and drains what it received. No custom module:
 *     the kernel's line discipline is the handler. Measured: IRQ -> flip
 *     buffer work -> echo -> TX, no user space in the path.
 *
 * On GPIO lines (--gpio CHIP:IN:OUT, the report's wiring: the stimulus on
 * an external-interrupt pin, the answer a toggled GPIO), the user path
 * only: this process waits for the input line's rising edge (GPIO
 * character device, v2 uAPI: the edge interrupt's handler queues the event)
 * and toggles the output line. There is no kernel path for GPIO without a
 * custom module (nothing in the kernel toggles one line on another's edge).
 *
 * Both write one 'R' once set up (the probe's ready edge; on GPIO: one
 * toggle of the output line). The run ends
 * when -n bytes were answered, when no byte came for --idle-s after the
 * first, or after -D seconds. --json writes what was measured and how.
 * Exit: 0 ran, 2 usage or set-up error (device, scheduling, memory lock).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/gpio.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <stdint.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "respond.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void respond_usage(FILE *f)
{
	fprintf(f,
		"usage: rtbench respond (--tty DEV [--kernel-echo] | --gpio CHIP:IN:OUT) [-p PRIO] [-a CPU]\n"
		"                       [-n COUNT] [-D SECONDS] [--idle-s S] [--json FILE]\n"
		"                       [--pause-after N --pause-ms MS]\n"
		"  --tty DEV        the tty the probe's stimulus arrives on\n"
		"  --kernel-echo    let the tty's ECHO answer (kernel path), only drain\n"
		"  --gpio CHIP:IN:OUT  stimulus: rising edges on line IN; answer: toggle line OUT\n"
		"  -p PRIO          SCHED_FIFO priority (default 99; 0: SCHED_OTHER)\n"
		"  -a CPU           pin to CPU\n"
		"  -n COUNT         stop after COUNT answers (0: no limit)\n"
		"  -D SECONDS       stop after SECONDS (default 60)\n"
		"  --idle-s S       stop when nothing came for S seconds after the first byte (default 3)\n"
		"  --pause-after N, --pause-ms MS  (tests) after N answers, answer nothing for MS ms\n");
}

struct gpio_io {
	int ev_fd, out_fd, level;
};

/* request IN (rising-edge events) and OUT (output, low) on CHIP */
static int gpio_open(const char *spec, struct gpio_io *g, char *err, size_t errlen)
{
	char chip[128];
	unsigned in, out;
	struct gpio_v2_line_request req;
	int cfd;

	if (sscanf(spec, "%127[^:]:%u:%u", chip, &in, &out) != 3) {
		snprintf(err, errlen, "--gpio %s: want CHIP:IN:OUT (e.g. /dev/gpiochip3:12:13)", spec);
		return -1;
	}
	cfd = open(chip, O_RDWR | O_CLOEXEC);
	if (cfd < 0) {
		snprintf(err, errlen, "%s: %s", chip, strerror(errno));
		return -1;
	}
	memset(&req, 0, sizeof(req));
	req.offsets[0] = in;
	req.num_lines = 1;
	snprintf(req.consumer, sizeof(req.consumer), "rtbench-respond");
	req.config.flags = GPIO_V2_LINE_FLAG_INPUT | GPIO_V2_LINE_FLAG_EDGE_RISING;
	if (ioctl(cfd, GPIO_V2_GET_LINE_IOCTL, &req) < 0) {
		snprintf(err, errlen, "%s line %u (input, rising edge): %s", chip, in, strerror(errno));
		close(cfd);
		return -1;
	}
	g->ev_fd = req.fd;
	memset(&req, 0, sizeof(req));
	req.offsets[0] = out;
	req.num_lines = 1;
	snprintf(req.consumer, sizeof(req.consumer), "rtbench-respond");
	req.config.flags = GPIO_V2_LINE_FLAG_OUTPUT;
	if (ioctl(cfd, GPIO_V2_GET_LINE_IOCTL, &req) < 0) {
		snprintf(err, errlen, "%s line %u (output): %s", chip, out, strerror(errno));
		close(cfd);
		return -1;
	}
	close(cfd);
	g->out_fd = req.fd;
	g->level = 0;
	return 0;
}

static int gpio_toggle(struct gpio_io *g)
{
	struct gpio_v2_line_values v = { .bits = 0, .mask = 1 };

	g->level = !g->level;
	v.bits = (__u64)g->level;
	return ioctl(g->out_fd, GPIO_V2_LINE_SET_VALUES_IOCTL, &v);
}

int rb_respond_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"tty", required_argument, 0, 't'},
		{"kernel-echo", no_argument, 0, 'k'},
		{"gpio", required_argument, 0, 'g'},
		{"idle-s", required_argument, 0, 'i'},
		{"json", required_argument, 0, 'j'},
		{"pause-after", required_argument, 0, 'P'},
		{"pause-ms", required_argument, 0, 'M'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *tty = NULL, *gpio = NULL, *json = NULL, *stop = "duration";
	struct gpio_io g = { -1, -1, 0 };
	char err[256];
	int kernel_echo = 0, prio = 99, cpu = -1, c, fd, mlocked, paused = 0;
	long count = 0, pause_after = 0, pause_ms = 0, answered = 0, received = 0, stray_writes = 0;
	double duration = 60, idle = 3, t0, t_last = 0, t;
	struct termios tio;
	unsigned char buf[256];
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "p:a:n:D:h", lo, NULL)) != -1) {
		switch (c) {
		case 't': tty = optarg; break;
		case 'g': gpio = optarg; break;
		case 'k': kernel_echo = 1; break;
		case 'j': json = optarg; break;
		case 'p': prio = (int)strtol(optarg, &end, 10); if (*end || prio < 0 || prio > 99) goto bad; break;
		case 'a': cpu = (int)strtol(optarg, &end, 10); if (*end || cpu < 0 || cpu >= CPU_SETSIZE) goto bad; break;
		case 'n': count = strtol(optarg, &end, 10); if (*end || count < 0) goto bad; break;
		case 'D': duration = strtod(optarg, &end); if (*end || duration <= 0) goto bad; break;
		case 'i': idle = strtod(optarg, &end); if (*end || idle <= 0) goto bad; break;
		case 'P': pause_after = strtol(optarg, &end, 10); if (*end || pause_after < 0) goto bad; break;
		case 'M': pause_ms = strtol(optarg, &end, 10); if (*end || pause_ms < 0 || pause_ms > 60000) goto bad; break;
		case 'h': respond_usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (!!tty == !!gpio || optind != argc)
		goto bad;
	if (gpio && kernel_echo) {
		fprintf(stderr, "rtbench respond: no kernel path on GPIO lines without a custom module\n");
		return 2;
	}
	if (gpio) {
		if (gpio_open(gpio, &g, err, sizeof(err))) {
			fprintf(stderr, "rtbench respond: %s\n", err);
			return 2;
		}
		fd = g.ev_fd;
		tty = gpio;
		goto setup;
	}

	fd = open(tty, O_RDWR | O_NOCTTY);
	if (fd < 0) {
		fprintf(stderr, "rtbench respond: %s: %s\n", tty, strerror(errno));
		return 2;
	}
	if (tcgetattr(fd, &tio)) {
		fprintf(stderr, "rtbench respond: %s is not a tty: %s\n", tty, strerror(errno));
		return 2;
	}
	cfmakeraw(&tio);
	cfsetspeed(&tio, B115200);
	tio.c_cflag |= CLOCAL | CREAD;
	tio.c_cc[VMIN] = 1;
	tio.c_cc[VTIME] = 0;
	if (kernel_echo)
		tio.c_lflag |= ECHO;	/* n_tty echoes in raw mode too: the kernel answers */
	if (tcsetattr(fd, TCSANOW, &tio)) {
		fprintf(stderr, "rtbench respond: %s: tcsetattr: %s\n", tty, strerror(errno));
		return 2;
	}
setup:
	mlocked = mlockall(MCL_CURRENT | MCL_FUTURE) == 0;
	if (!mlocked) {
		fprintf(stderr, "rtbench respond: mlockall: %s\n", strerror(errno));
		return 2;
	}
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			fprintf(stderr, "rtbench respond: CPU %d: %s\n", cpu, strerror(errno));
			return 2;
		}
	}
	if (prio > 0) {
		struct sched_param sp = { .sched_priority = prio };

		if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
			fprintf(stderr, "rtbench respond: SCHED_FIFO %d: %s\n", prio, strerror(errno));
			return 2;
		}
	}
	if (gpio) {
		if (gpio_toggle(&g)) {	/* the ready edge */
			fprintf(stderr, "rtbench respond: %s: the ready toggle: %s\n", gpio, strerror(errno));
			return 2;
		}
	} else if (tcflush(fd, TCIOFLUSH), write(fd, "R", 1) != 1) {
		fprintf(stderr, "rtbench respond: %s: writing the ready byte: %s\n", tty, strerror(errno));
		return 2;
	}
	t0 = now_s();
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double left = t0 + duration - now_s();
		ssize_t n, i;
		int r;

		if (count && answered >= count) { stop = "count"; break; }
		if (left <= 0) { stop = "duration"; break; }
		if (t_last > 0 && now_s() - t_last >= idle) { stop = "idle"; break; }
		r = poll(&p, 1, (int)(1000 * (left < 0.5 ? left : 0.5)) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "rtbench respond: poll: %s\n", strerror(errno));
			return 2;
		}
		if (r == 0)
			continue;
		if (gpio) {
			struct gpio_v2_line_event ev;

			if (read(fd, &ev, sizeof(ev)) != (ssize_t)sizeof(ev))
				continue;
			received++;
			t_last = now_s();
			if (pause_after && !paused && answered == pause_after) {
				struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };

				paused = 1;
				nanosleep(&ts, NULL);
				continue;
			}
			if (gpio_toggle(&g))
				stray_writes++;
			else
				answered++;
			continue;
		}
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			continue;
		t = now_s();
		t_last = t;
		received += n;
		if (kernel_echo) {
			answered = received;	/* the line discipline answered each already */
			continue;
		}
		for (i = 0; i < n; i++) {
			if (pause_after && !paused && answered == pause_after) {
				struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };

				paused = 1;	/* the fault: the stimuli of the next MS ms go unanswered */
				nanosleep(&ts, NULL);
				tcflush(fd, TCIFLUSH);
				break;
			}
			if (write(fd, &buf[i], 1) != 1)
				stray_writes++;
			else
				answered++;
		}
	}
	if (json) {
		FILE *f = fopen(json, "w");

		if (!f) {
			fprintf(stderr, "rtbench respond: %s: %s\n", json, strerror(errno));
			return 2;
		}
		fprintf(f, "{\n  \"responder\": {\n    \"path\": \"%s\",\n    \"device\": \"%s\",\n"
			"    \"policy\": \"%s\",\n    \"priority\": %d,\n    \"cpu\": %d,\n"
			"    \"mlockall\": %s,\n    \"received\": %ld,\n    \"answered\": %ld,\n"
			"    \"failed_writes\": %ld,\n    \"paused_ms\": %ld,\n    \"stop\": \"%s\",\n"
			"    \"elapsed_s\": %.3f\n  }\n}\n",
			kernel_echo ? "kernel-tty-echo" : gpio ? "user-gpio" : "user", tty, prio > 0 ? "SCHED_FIFO" : "SCHED_OTHER",
			prio, cpu, mlocked ? "true" : "false", received, answered, stray_writes,
			paused ? pause_ms : 0, stop, now_s() - t0);
		fclose(f);
	}
	printf("rtbench respond: %s path on %s: received %ld, answered %ld, stopped by %s\n",
	       kernel_echo ? "kernel-tty-echo" : gpio ? "user-gpio" : "user", tty, received, answered, stop);
	close(fd);
	return 0;
bad:
	respond_usage(stderr);
	return 2;
}
