/*
 * Console capture against a real guest (TCG here), through the VM driver:
 *   - flood with rotation in a loop (what a CI run of functional:vm once
 *     hung on): every round's end marker arrives, the retained console
 *     stays under its cap and holds the marker;
 *   - the guest floods /dev/ttyS0 (base64 and raw bytes), /dev/console and
 *     printk (/dev/kmsg) at once for a bounded time, then writes a marker
 *     through each: every marker shows up within seconds, and a timer on
 *     the same event loop kept firing on time meanwhile (the reader yields);
 *   - a NUL and other control bytes reach the retained console as sent,
 *     and the lines after them arrive;
 *   - freeing the VM leaves no console fd open.
 * The test init (vmtest.h) runs the guest side; no agent involved.
 * Usage: test_console [rotation,flood,control]; CONSOLE_ROUNDS and
 * CONSOLE_FLOOD_S (seconds) change the sizes.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "vm/console_file.h"
#include "leftovers.h"
#include "vmtest.h"
#include "../unit/t.h"

#define BOOT_MS		180000
#define ROUND_MS	120000	/* a round takes ~1 s; only a stall gets near this */
#define MARK_MS		20000	/* a marker after a flood: seconds, not minutes */
#define CAP		(64 * 1024)
#define TEST_APPEND	"airlock.init=/airlock-test-init"

static char tag[32];
static int rounds = 12, flood_s = 20;

struct box {
	char			*name;
	struct stor_sandbox	 ss;
	struct vt		 t;
};

static int
box_up(struct box *b, const char *suffix)
{
	struct vm_config c;
	char *cause = NULL;

	memset(b, 0, sizeof(*b));
	xasprintf(&b->name, "%s-%s", tag, suffix);
	if (stor_sandbox_create(b->name, vt_tp.rootfs, 256ULL << 20, &b->ss, &cause) == -1 ||
	    vt_install_init(&b->ss, &cause) == -1)
		goto bad;
	c = vt_config(b->name, &b->ss, -1, -1, TEST_APPEND);
	c.console_max = CAP;
	if ((b->t.vm = vm_boot(vt_base, &c, vt_event, vt_done, &b->t, &cause)) == NULL)
		goto bad;
	if (vt_wait_flag(&b->t.done, BOOT_MS) == -1 || !b->t.ok ||
	    vt_wait_line(&b->t, 0, "CNT 1 ", BOOT_MS) == -1) {
		fprintf(stderr, "   %s did not come up\n", b->name);
		return -1;
	}
	return 0;
bad:
	fprintf(stderr, "box %s: %s\n", b->name, cause);
	free(cause);
	return -1;
}

static void
box_down(struct box *b)
{
	char *cause = NULL;

	if (b->t.vm != NULL) {
		vm_free(b->t.vm);
		b->t.vm = NULL;
	}
	if (b->ss.ss_dir != NULL && stor_sandbox_destroy(&b->ss, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
	}
	vt_clear(&b->t);
	free(b->name);
}

/* Forget the lines seen so far (keeps the agent connection). */
static void
vt_forget(struct vt *t)
{
	int i;

	for (i = 0; i < t->nlines; i++)
		free(t->lines[i]);
	t->nlines = 0;
}

static size_t
retained(const struct box *b)
{
	struct stat st;
	size_t n = 0;
	char *old;

	xasprintf(&old, "%s.1", b->ss.ss_console);
	if (stat(b->ss.ss_console, &st) == 0)
		n += (size_t)st.st_size;
	if (stat(old, &st) == 0)
		n += (size_t)st.st_size;
	free(old);
	return n;
}

static int
retained_has(const struct box *b, const char *needle, size_t nlen)
{
	size_t len;
	char *buf = console_file_read(b->ss.ss_console, CAP, &len);
	int found = memmem(buf, len, needle, nlen) != NULL;

	free(buf);
	return found;
}

/*
 * Run the loop until the retained console (what GET .../logs reads) holds
 * needle; seconds taken, or -1. A flood of short lines overflows the vt
 * line list, so the flood test looks here.
 */
static double
wait_retained(const struct box *b, const char *needle, int ms)
{
	double t0 = vt_now();

	while (vt_now() - t0 < ms / 1000.0) {
		if (retained_has(b, needle, strlen(needle)))
			return vt_now() - t0;
		vt_run(50);
	}
	return retained_has(b, needle, strlen(needle)) ? vt_now() - t0 : -1;
}

/* Flood through a rotation several times per round, round after round. */
static void
test_rotation_stress(void)
{
	struct box b;
	char cmd[256], mark[32];
	double t0, worst = 0;
	size_t most = 0;
	int k, ok = 0;

	if (box_up(&b, "rot") == -1) {
		CHECK(0);
		box_down(&b);
		return;
	}
	for (k = 0; k < rounds; k++) {
		vt_forget(&b.t);
		snprintf(mark, sizeof(mark), "ROUND-%d-DONE", k);
		/* ~160 KB a round: two to three rotations of a 64 KiB cap. */
		snprintf(cmd, sizeof(cmd), "sh l=0123456789012345678901234567890123456789"
		    "01234567890123456789012345678901234567890123456789; for ((i = 0; i < 1500;"
		    " i++)); do echo \"R%d-$i $l\"; done; echo %s\n", k, mark);
		t0 = vt_now();
		CHECK(vt_send(&b.t, cmd) == 0);
		if (vt_wait_line(&b.t, 0, mark, ROUND_MS) == -1) {
			fprintf(stderr, "   round %d: no %s after %.0f s, %d lines (stalled)\n", k,
			    mark, vt_now() - t0, b.t.nlines);
			CHECK(!"round finished");
			break;
		}
		if (vt_now() - t0 > worst)
			worst = vt_now() - t0;
		if (retained(&b) > most)
			most = retained(&b);
		CHECK(retained(&b) <= CAP);
		CHECK(retained_has(&b, mark, strlen(mark)));
		ok++;
	}
	fprintf(stderr, "   %d/%d rounds, slowest %.1f s, retained at most %zu of %d bytes\n", ok,
	    rounds, worst, most, CAP);
	box_down(&b);
}

struct lateness {
	struct event	*ev;
	double		 due, worst;
	int		 n;
};

#define TICK_MS	20

static void
tick(evutil_socket_t fd, short what, void *arg)
{
	struct lateness *l = arg;
	struct timeval tv = { 0, TICK_MS * 1000 };
	double late = vt_now() - l->due;

	if (late > l->worst)
		l->worst = late;
	l->n++;
	l->due = vt_now() + TICK_MS / 1000.0;
	evtimer_add(l->ev, &tv);
}

/*
 * The hostile flood: every way onto the serial line at once, for a bounded
 * time, then a marker through each way.
 */
static void
test_flood_markers(void)
{
	static const char *const how[][2] = {
		{ "console", "echo MARK-console > /dev/console" },
		{ "ttyS0", "echo MARK-ttyS0 > /dev/ttyS0" },
		{ "kmsg", "echo '<3>MARK-kmsg' > /dev/kmsg" },
	};
	struct lateness l = { 0 };
	struct vm_stats st;
	struct timeval tv = { 0, TICK_MS * 1000 };
	struct box b;
	char cmd[768];
	double t0, secs;
	size_t i;

	if (box_up(&b, "flood") == -1) {
		CHECK(0);
		box_down(&b);
		return;
	}
	snprintf(cmd, sizeof(cmd), "sh ( timeout %d sh -c 'base64 /dev/urandom > /dev/ttyS0' &"
	    " timeout %d sh -c 'cat /dev/urandom > /dev/ttyS0' &"
	    " timeout %d sh -c 'yes > /dev/console' &"
	    " timeout %d bash -c 'while :; do echo \"<3>kmsg flood $RANDOM\" > /dev/kmsg; done' &"
	    " wait; echo; echo FLOODS-OVER ) &\n", flood_s, flood_s, flood_s, flood_s);
	if (getenv("CONSOLE_FLOOD_CMD") != NULL)	/* experiments: one way in at a time */
		snprintf(cmd, sizeof(cmd), "sh ( %s; echo; echo FLOODS-OVER ) &\n",
		    getenv("CONSOLE_FLOOD_CMD"));
	l.ev = evtimer_new(vt_base, tick, &l);
	l.due = vt_now() + TICK_MS / 1000.0;
	evtimer_add(l.ev, &tv);
	t0 = vt_now();
	vt_forget(&b.t);
	CHECK(vt_send(&b.t, cmd) == 0);
	CHECK(wait_retained(&b, "FLOODS-OVER", (flood_s + 120) * 1000) >= 0);
	event_free(l.ev);
	vm_stats(b.t.vm, &st);
	fprintf(stderr, "   flood: %.1f s, %llu bytes read (%.0f KB/s), %llu dropped; "
	    "a %d ms timer on the loop was at most %.0f ms late (%d ticks)\n", vt_now() - t0,
	    (unsigned long long)st.console_bytes, (double)st.console_bytes / 1024.0 / (vt_now() - t0),
	    (unsigned long long)st.console_dropped, TICK_MS, l.worst * 1000, l.n);
	/*
	 * A read budget is milliseconds of work, but this test's own line
	 * callback (vt_event copies every line) and ASan on a shared 2-core
	 * host stretch it; a reader that never yields shows as the whole flood.
	 */
	CHECK(l.worst < 5.0);
	CHECK(retained(&b) <= CAP);
	for (i = 0; i < sizeof(how) / sizeof(how[0]); i++) {
		char mark[32];
		snprintf(mark, sizeof(mark), "MARK-%s", how[i][0]);
		snprintf(cmd, sizeof(cmd), "sh %s\n", how[i][1]);
		CHECK(vt_send(&b.t, cmd) == 0);
		CHECK((secs = wait_retained(&b, mark, MARK_MS)) >= 0);
		fprintf(stderr, "   marker via %s: %.2f s\n", how[i][0], secs);
	}
	if (getenv("CONSOLE_KEEP") != NULL) {	/* experiments: what the guest printed */
		size_t len;
		char *all = console_file_read(b.ss.ss_console, CAP, &len);
		write_file_atomic(getenv("CONSOLE_KEEP"), all, len, 0600, NULL);
		free(all);
	}
	box_down(&b);
}

/* A NUL and other control bytes: kept as sent, and what follows arrives. */
static void
test_control_bytes(void)
{
	static const char want[] = "nul-before\0nul-after\r\nesc-\033[2J\001\177-after\r\n";
	struct box b;
	int i;

	if (box_up(&b, "ctl") == -1) {
		CHECK(0);
		box_down(&b);
		return;
	}
	CHECK(vt_send(&b.t, "sh printf 'nul-before\\000nul-after\\nesc-\\033[2J\\001\\177-after\\n'"
	    " > /dev/console; echo CTL-DONE\n") == 0);
	CHECK((i = vt_wait_line(&b.t, 0, "CTL-DONE", MARK_MS)) >= 0);
	CHECK(vt_find(&b.t, 0, "esc-\033[2J\001\177-after") >= 0);
	/* The retained console has the bytes as the guest sent them (the tty's CR LF included). */
	CHECK(retained_has(&b, want, sizeof(want) - 1));
	box_down(&b);
}

static int
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	while (d != NULL && (de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	if (d != NULL)
		closedir(d);
	return n;
}

int
main(int argc, char **argv)
{
	char *before, *after;
	int fds;

	if (getenv("CONSOLE_ROUNDS") != NULL)
		rounds = atoi(getenv("CONSOLE_ROUNDS"));
	if (getenv("CONSOLE_FLOOD_S") != NULL)
		flood_s = atoi(getenv("CONSOLE_FLOOD_S"));
	snprintf(tag, sizeof(tag), "tcon%ld", (long)getpid());
	if (vt_setup() == -1)
		return 1;
	before = leftovers(tag);
	fds = open_fds();
	if (argc < 2 || strstr(argv[1], "rotation") != NULL)
		T_RUN(test_rotation_stress);
	if (argc < 2 || strstr(argv[1], "flood") != NULL)
		T_RUN(test_flood_markers);
	if (argc < 2 || strstr(argv[1], "control") != NULL)
		T_RUN(test_control_bytes);
	/*
	 * Every VM freed: no console socket or file left open, nothing on the
	 * host. (libevent closes a freed bufferevent's fd, QMP's, from the loop.)
	 */
	vt_run(50);
	CHECK(open_fds() == fds);
	if (open_fds() != fds && system("ls -l /proc/$PPID/fd >&2") != 0)
		fprintf(stderr, "   (cannot list fds)\n");
	after = leftovers(tag);
	CHECK_STR(after, before);
	free(before);
	free(after);
	vt_teardown();
	return t_done();
}
