/*
 * What the VM benchmarks (bench_vm.c, bench_spare.c) share: a series of
 * samples and its markdown row, a sandbox per run, the stop and cleanup
 * after one, the agent's first PONG, and the base snapshot every restore
 * starts from. Header-only after tests/lib/vmtest.h, whose loop and
 * template state it uses (one file per binary, as vmtest.h).
 */
#ifndef AIRLOCK_BENCH_COMMON_H
#define AIRLOCK_BENCH_COMMON_H

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/agent/agent_console.h"
#include "link/chan_proto.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/stor_snapshot.h"

#define BENCH_BOOT_MS	180000
#define BENCH_OP_MS	60000
#define BENCH_MAX	1000

struct series {
	const char	*name;
	const char	*unit;
	double		 v[BENCH_MAX];
	int		 n;
};

/* Names this run's sandboxes and snapshots ("<tag>-base", ...): set it in main. */
static char bench_tag[32];

static __attribute__((unused)) void
bench_add(struct series *s, double v)
{
	if (s->n < BENCH_MAX)
		s->v[s->n++] = v;
}

static int
bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* "| name | median | p90 | n |" on stdout (sorts s). */
static __attribute__((unused)) void
bench_report(struct series *s)
{
	double med, p90;

	if (s->n == 0) {
		printf("| %s | n/a | n/a | 0 |\n", s->name);
		return;
	}
	qsort(s->v, (size_t)s->n, sizeof(double), bench_cmp_double);
	med = s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
	p90 = s->v[(int)((s->n - 1) * 0.9 + 0.5)];
	printf("| %s | %.1f %s | %.1f %s | %d |\n", s->name, med, s->unit, p90, s->unit, s->n);
	fflush(stdout);
}

/* The sandbox "<tag>-<suffix><i>" on rootfs; -1 after printing why. */
static __attribute__((unused)) int
bench_sandbox(const char *suffix, int i, const char *rootfs, struct stor_sandbox *ss)
{
	char *name, *cause = NULL;
	int rc;

	xasprintf(&name, "%s-%s%d", bench_tag, suffix, i);
	rc = stor_sandbox_create(name, rootfs, 256ULL << 20, ss, &cause);
	if (rc == -1) {
		fprintf(stderr, "bench: %s\n", cause);
		free(cause);
	}
	free(name);
	return rc;
}

/* Stop t's VM if it still runs, free it and destroy its sandbox. */
static __attribute__((unused)) void
bench_finish(struct vt *t, struct stor_sandbox *ss)
{
	char *cause = NULL;

	if (t->vm != NULL && vm_state(t->vm) != VM_EXITED) {
		t->done = 0;
		if (vm_stop(t->vm, 0, vt_done, &cause) == 0)
			vt_wait_flag(&t->done, BENCH_OP_MS);
		free(cause);
	}
	vm_free(t->vm);
	vt_clear(t);
	stor_sandbox_destroy(ss, NULL);
}

/*
 * HELLO + PING on the agent socket until a PONG, for up to timeout_ms,
 * polling the socket poll_ms at a time between turns of the driver's loop
 * (the console must be drained): ms since t0, or -1.
 */
static __attribute__((unused)) double
bench_agent_ping_ms(struct vm *vm, double t0, int timeout_ms, int poll_ms)
{
	uint8_t out[2 * CHAN_CTL_MAX + 8], in[4096];
	size_t olen, ilen = 0;
	struct pollfd pfd;
	double end = vt_now() + timeout_ms / 1000.0;
	int fd;

	if ((fd = vm_agent_connect(vm, NULL)) == -1)
		return -1;
	olen = chan_encode_ctl(out, CHAN_HELLO, 0, CHAN_VERSION, CHAN_INITIAL_WINDOW, NULL);
	olen += chan_encode_hdr(out + olen, CHAN_PING, 0, 8);
	memcpy(out + olen, "airlockb", 8);
	olen += 8;
	if (write(fd, out, olen) != (ssize_t)olen) {
		close(fd);
		return -1;
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	while (vt_now() < end) {
		struct chan_frame f;
		const char *err;
		long used;

		event_base_loop(vt_base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, poll_ms) <= 0)
			continue;
		ssize_t n = read(fd, in + ilen, sizeof(in) - ilen);
		if (n <= 0)
			break;
		ilen += (size_t)n;
		while ((used = chan_decode(in, ilen, &f, &err)) > 0) {
			if (f.type == CHAN_PONG) {
				close(fd);
				return (vt_now() - t0) * 1000.0;
			}
			memmove(in, in + used, ilen - (size_t)used);
			ilen -= (size_t)used;
		}
		if (used == -1 || ilen == sizeof(in))
			break;
	}
	close(fd);
	return -1;
}

/*
 * Boot once to agent-ready and suspend it into the base snapshot: its
 * directory (malloc'd), or NULL after printing why.
 */
static __attribute__((unused)) char *
bench_make_base(void)
{
	struct stor_sandbox ss;
	struct vt t;
	char *cause = NULL, *id, *dir = NULL;

	memset(&t, 0, sizeof(t));
	if (bench_sandbox("base", 0, vt_tp.rootfs, &ss) == -1)
		return NULL;
	struct vm_config c = vt_config(ss.ss_name, &ss, -1, -1, NULL);
	t.vm = vm_boot(vt_base, &c, vt_event, vt_done, &t, &cause);
	if (t.vm == NULL || vt_wait_line(&t, 0, AGENT_READY_LINE, BENCH_BOOT_MS) < 0) {
		fprintf(stderr, "bench: base boot failed: %s\n", cause ? cause : "no ready line");
		free(cause);
		bench_finish(&t, &ss);
		return NULL;
	}
	vt_run(500);
	xasprintf(&id, "%s-base", bench_tag);
	t.done = 0;
	double t0 = vt_now();
	if (vm_snapshot(t.vm, id, 1, vt_done, &cause) == 0 &&
	    vt_wait_flag(&t.done, BENCH_OP_MS) == 0 && t.ok) {
		dir = paths_data("snapshots/%s", id);
		fprintf(stderr, "bench: base snapshot (suspend) took %.1f ms\n",
		    (vt_now() - t0) * 1000.0);
	} else
		fprintf(stderr, "bench: snapshot failed: %s\n", cause ? cause : t.error);
	free(cause);
	free(id);
	bench_finish(&t, &ss);
	return dir;
}

/* bench_make_base, then its sealed memory as *memfd for shared restores; NULL after printing why. */
static __attribute__((unused)) char *
bench_base(int *memfd)
{
	struct stor_snap_header h;
	char *snapdir, *cause = NULL;

	if ((snapdir = bench_make_base()) == NULL)
		return NULL;
	if (stor_snapshot_load(snapdir, &h, &cause) == -1 ||
	    stor_snapshot_memfd(snapdir, h.mem_size, memfd, &cause) == -1) {
		fprintf(stderr, "bench: %s\n", cause);
		free(cause);
		free(snapdir);
		return NULL;
	}
	stor_snap_header_free(&h);
	return snapdir;
}

#endif
