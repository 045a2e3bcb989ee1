/*
 * Helpers for tests and benchmarks that drive the VM driver: a sandbox
 * with a test init in its rootfs, a console recorder, and running the
 * event loop until a condition holds. Header-only (one file per binary).
 *
 * The test init (airlock.init=/airlock-test-init) does not depend on the
 * guest agent: it prints "CNT n FILES a,b," every 0.2 s listing a tmpfs,
 * and creates files there on "touch NAME" lines from the agent port;
 * "panic" makes it (PID 1) exit, which panics the guest kernel; "flood N"
 * prints N lines of ~100 bytes; "sh CMD" runs a bash command line as root
 * (the console tests start floods with it: `sh yes > /dev/console &`).
 */
#ifndef AIRLOCK_TEST_VMTEST_H
#define AIRLOCK_TEST_VMTEST_H

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/subproc.h"
#include "common/digest.h"
#include "common/util.h"
#include "images/stor_sandbox.h"
#include "images/template.h"
#include "vm/vm.h"

#define VT_LINES_MAX	32768

/*
 * Bash builtins only in the loops: fork+exec is slow under TCG.
 * The agent port is opened once and held: read() on it says EOF while no
 * host is connected, and the guest's virtio_console driver discards what
 * the port holds unread when it is closed. An init that reopened the port
 * after each EOF lost a command the host sent between that open and the
 * close (the first command after boot, now and then): the "console stalls"
 * seen in CI (no marker while the "CNT" ticker went on, 5 lines a second,
 * for the whole deadline) were that, not the host's console reader.
 */
static const char vt_init_script[] =
	"#!/bin/bash\n"
	"# airlock VM engine test init (tests/lib/vmtest.h)\n"
	"mount -t tmpfs tmpfs /mnt\n"
	"echo boot > /mnt/boot-marker\n"
	"mkfifo /mnt/.tick\n"
	"exec 3<>/mnt/.tick\n"
	"port=\n"
	"for d in /sys/class/virtio-ports/*; do\n"
	"  read -r nm < $d/name\n"
	"  [ \"$nm\" = org.airlock.agent ] && port=/dev/${d##*/}\n"
	"done\n"
	"echo \"TESTINIT READY port=$port\"\n"
	"( n=0; while true; do n=$((n+1)); out=; for f in /mnt/*; do out=\"$out${f##*/},\"; done;"
	" echo \"CNT $n FILES $out\"; read -t 0.2 -u 3 _; done ) &\n"
	"[ -n \"$port\" ] && { exec 4<\"$port\"; } 2>/dev/null || port=\n"
	"while true; do\n"
	"  if [ -n \"$port\" ] && read -r -u 4 cmd arg; then\n"
	"    case \"$cmd\" in\n"
	"      touch) echo \"$arg\" > \"/mnt/$arg\"; echo \"DONE touch $arg\";;\n"
	"      panic) echo \"PANICKING\"; exit 1;;\n"
	"      flood) l=0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789;"
	" for ((i = 0; i < arg; i++)); do echo \"F$i $l\"; done; echo \"FLOOD DONE\";;\n"
	"      sh) eval \"$arg\";;\n"
	"    esac\n"
	"  else\n"
	"    read -t 0.1 -u 3 _\n"
	"  fi\n"
	"done\n";

struct vt {
	struct vm	*vm;
	char		**lines;	/* grows up to VT_LINES_MAX */
	int		 nlines, caplines;
	int		 done, ok;
	char		*error;
	int		 exited, exit_expected;
	char		*exit_reason;
	char		*guest_stop;
	int		 agent_fd;	/* 0 or -1: not connected */
};

static struct event_base *vt_base;
static struct template_paths vt_tp;
static struct accel_info vt_ai;
static char *vt_kernel_id;

static __attribute__((unused)) void
vt_event(struct vm *vm, const struct vm_event *e, void *arg)
{
	struct vt *t = arg;

	switch (e->type) {
	case VM_EVENT_CONSOLE:
		if (t->nlines == t->caplines && t->caplines < VT_LINES_MAX) {
			t->caplines = t->caplines ? t->caplines * 2 : 256;
			t->lines = xreallocarray(t->lines, (size_t)t->caplines, sizeof(char *));
		}
		if (t->nlines < t->caplines)
			t->lines[t->nlines++] = xstrdup(e->line);
		break;
	case VM_EVENT_GUEST_STOPPED:
		free(t->guest_stop);
		t->guest_stop = xstrdup(e->reason);
		break;
	case VM_EVENT_EXITED:
		t->exited = 1;
		t->exit_expected = e->expected;
		free(t->exit_reason);
		t->exit_reason = xstrdup(e->reason);
		if (!e->expected)
			fprintf(stderr, "   vm exited: %s\n%s", e->reason, e->console_tail);
		break;
	}
}

static __attribute__((unused)) void
vt_done(struct vm *vm, const char *error, void *arg)
{
	struct vt *t = arg;

	t->done = 1;
	t->ok = error == NULL;
	free(t->error);
	t->error = error ? xstrdup(error) : NULL;
	if (error != NULL)
		fprintf(stderr, "   op failed: %s\n", error);
}

static __attribute__((unused)) double
vt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static __attribute__((unused)) void
vt_tick(evutil_socket_t fd, short ev, void *arg)
{
	event_base_loopbreak(vt_base);
}

/* Run the loop for up to ms (returns early on any event ~every 10 ms). */
static __attribute__((unused)) void
vt_run(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct event *t = evtimer_new(vt_base, vt_tick, NULL);

	evtimer_add(t, &tv);
	event_base_loop(vt_base, EVLOOP_ONCE);
	event_free(t);
}

/* Run until *flag is set or timeout_ms pass; 0 when set. */
static __attribute__((unused)) int
vt_wait_flag(int *flag, int timeout_ms)
{
	double end = vt_now() + timeout_ms / 1000.0;

	while (!*flag && vt_now() < end)
		vt_run(50);
	return *flag ? 0 : -1;
}

/* Index of the first line at or after from containing needle, or -1. */
static __attribute__((unused)) int
vt_find(struct vt *t, int from, const char *needle)
{
	int i;

	for (i = from; i < t->nlines; i++)
		if (strstr(t->lines[i], needle) != NULL)
			return i;
	return -1;
}

static __attribute__((unused)) int
vt_wait_line(struct vt *t, int from, const char *needle, int timeout_ms)
{
	double end = vt_now() + timeout_ms / 1000.0;
	int i;

	while ((i = vt_find(t, from, needle)) == -1 && vt_now() < end && !t->exited)
		vt_run(50);
	if (i == -1)
		i = vt_find(t, from, needle);
	return i;
}

/* The counter of the last complete "CNT n" line at or after from, or -1. */
static __attribute__((unused)) long
vt_last_cnt(struct vt *t, int from, int *at)
{
	long n = -1;
	int i;

	for (i = from; i < t->nlines; i++) {
		const char *p = strstr(t->lines[i], "CNT ");
		if (p != NULL && p == t->lines[i] && strstr(p, " FILES ") != NULL) {
			n = strtol(p + 4, NULL, 10);
			if (at != NULL)
				*at = i;
		}
	}
	return n;
}

static __attribute__((unused)) void
vt_clear(struct vt *t)
{
	int i;

	for (i = 0; i < t->nlines; i++)
		free(t->lines[i]);
	free(t->lines);
	if (t->agent_fd > 0)
		close(t->agent_fd);
	free(t->error);
	free(t->exit_reason);
	free(t->guest_stop);
	memset(t, 0, sizeof(*t));
}

/*
 * Send one line to the guest's agent port (the test init reads it). The
 * connection stays open until vt_clear: the guest reads only while a host
 * side is connected, and under load it may take a while to get there.
 */
static __attribute__((unused)) int
vt_send(struct vt *t, const char *line)
{
	char *cause = NULL;

	if (t->agent_fd <= 0 && (t->agent_fd = vm_agent_connect(t->vm, &cause)) == -1) {
		fprintf(stderr, "   %s\n", cause);
		free(cause);
		return -1;
	}
	return write(t->agent_fd, line, strlen(line)) == (ssize_t)strlen(line) ? 0 : -1;
}

/* Put the test init into a sandbox's rootfs (debugfs: no mount needed). */
static __attribute__((unused)) int
vt_install_init(const struct stor_sandbox *ss, char **cause)
{
	char *script, *cmd;
	int rc;

	xasprintf(&script, "%s/airlock-test-init", ss->ss_dir);
	if (write_file_atomic(script, vt_init_script, strlen(vt_init_script), 0755, cause) == -1) {
		free(script);
		return -1;
	}
	xasprintf(&cmd, "write %s /airlock-test-init", script);
	const char *argv[] = { "debugfs", "-w", "-R", cmd, ss->ss_rootfs, NULL };
	rc = subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, cause);
	unlink(script);
	free(script);
	free(cmd);
	return rc;
}

static __attribute__((unused)) int
vt_setup(void)
{
	char *cause = NULL, hex[65];

	vt_base = event_base_new();
	if (template_paths("base", &vt_tp, &cause) == -1 ||
	    accel_detect(VM_ACCEL_AUTO, &vt_ai, &cause) == -1) {
		fprintf(stderr, "setup: %s\n", cause);
		free(cause);
		return -1;
	}
	/* The kernel identity recorded in snapshots. */
	if (sha256_file_hex(vt_tp.kernel, hex, &cause) == -1) {
		fprintf(stderr, "setup: %s\n", cause);
		free(cause);
		return -1;
	}
	vt_kernel_id = xstrdup(hex);
	return 0;
}

static __attribute__((unused)) void
vt_teardown(void)
{
	template_paths_free(&vt_tp);
	free(vt_kernel_id);
	event_base_free(vt_base);
}

static __attribute__((unused)) struct vm_config
vt_config(const char *name, const struct stor_sandbox *ss, int netns_fd, int tap_fd,
    const char *append)
{
	struct vm_config c;

	memset(&c, 0, sizeof(c));
	c.name = name;
	c.template_name = "base";
	c.kernel_id = vt_kernel_id;
	c.kernel = vt_tp.kernel;
	c.initrd = vt_tp.initrd;
	c.append = append;
	c.accel = vt_ai.accel;
	c.tsc_khz = vt_ai.tsc_khz;
	c.vcpus = 2;
	c.memory_mb = 256;
	c.sandbox = ss;
	c.netns_fd = netns_fd;
	c.tap_fd = tap_fd;
	c.console_events = 1;
	return c;
}

#endif
