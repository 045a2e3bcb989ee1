/*
 * Restore paths for fast create Tier 1 (docs/performance.md, "Spare VMMs"):
 * jailed QEMU microvm, the base template booted once to agent-ready and
 * suspended into a snapshot, clones on its sealed base memfd.
 *
 *   full restore   vm_restore() -> running, -> agent PONG (spawn included)
 *                  (full and spare runs alternate: the host is shared)
 *   spare          vm_spawn_incoming() ahead (not timed on the path), then
 *                  vm_incoming() -> running, -> agent PONG
 *   snapshot       vm_snapshot() of a running own-RAM restore (guest stopped
 *                  to cont answered), repeated on one VM
 *   spare memory   RSS/PSS of N idle spares at once
 *
 * Builds against a vm.h without spares too (VM_SPARE_API undefined: only
 * full restore and snapshot), so the same harness measures main's code.
 *
 * Usage: bench_spare [-n RUNS] [-s SPARES]   (defaults 20, 4)
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/agent/agent_console.h"
#include "link/chan_proto.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/stor_snapshot.h"
#include "../tests/lib/vmtest.h"
#include "bench_common.h"

#define BENCH_PING_MS	5000
#define BENCH_POLL_MS	2	/* agent socket poll slice between loop turns */
#define SPARES_MAX	16

static int runs = 20, nspares = 4;

/*
 * A restore asked for at t0: once it ran, its time to running and to the
 * agent's PONG; 1 with the VM's phase timings in *tm, 0 when it failed.
 */
static int
restored(struct vt *t, double t0, struct series *running, struct series *ready,
    struct vm_timings *tm)
{
	double ms;

	if (vt_wait_flag(&t->done, BENCH_OP_MS) != 0 || !t->ok)
		return 0;
	bench_add(running, (vt_now() - t0) * 1000.0);
	vm_timings(t->vm, tm);
	if ((ms = bench_agent_ping_ms(t->vm, t0, BENCH_PING_MS, BENCH_POLL_MS)) >= 0)
		bench_add(ready, ms);
	return 1;
}

/* One full restore (run i); -1 when it could not start. */
static int
bench_full(const char *snapdir, int memfd, int i, struct series *running,
    struct series *mig, struct series *ready)
{
	struct stor_sandbox ss;
	struct vm_timings tm;
	struct vt t;
	char *cause = NULL, *rootfs;
	double t0;
	int rc = -1;

	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	do {
		memset(&t, 0, sizeof(t));
		if (bench_sandbox("full", i, rootfs, &ss) == -1)
			break;
		struct vm_config c = vt_config(ss.ss_name, &ss, -1, -1, NULL);
		t0 = vt_now();
		t.vm = vm_restore(vt_base, &c, snapdir, VM_RESTORE_SHARED, memfd, vt_event,
		    vt_done, &t, &cause);
		if (t.vm == NULL) {
			fprintf(stderr, "bench: restore: %s\n", cause);
			free(cause);
			stor_sandbox_destroy(&ss, NULL);
			break;
		}
		rc = 0;
		if (restored(&t, t0, running, ready, &tm))
			bench_add(mig, tm.running - tm.qmp_ready);
		bench_finish(&t, &ss);
	} while (0);
	free(rootfs);
	return rc;
}

/* Snapshot a running own-RAM restore again and again: guest stop to cont. */
static void
bench_snapshot(const char *snapdir, struct series *snap)
{
	struct stor_sandbox ss;
	struct vt t;
	char *cause = NULL, *rootfs, *id, *dir;
	double t0;
	int i;

	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	memset(&t, 0, sizeof(t));
	if (bench_sandbox("snap", 0, rootfs, &ss) == -1) {
		free(rootfs);
		return;
	}
	struct vm_config c = vt_config(ss.ss_name, &ss, -1, -1, NULL);
	t.vm = vm_restore(vt_base, &c, snapdir, VM_RESTORE_OWN, -1, vt_event, vt_done, &t, &cause);
	if (t.vm == NULL || vt_wait_flag(&t.done, BENCH_OP_MS) == -1 || !t.ok) {
		fprintf(stderr, "bench: own restore: %s\n", cause ? cause : t.error);
		free(cause);
		bench_finish(&t, &ss);
		free(rootfs);
		return;
	}
	vt_run(500);
	for (i = 0; i < runs; i++) {
		xasprintf(&id, "%s-again%d", bench_tag, i);
		t.done = 0;
		t0 = vt_now();
		if (vm_snapshot(t.vm, id, 0, vt_done, &cause) == -1 ||
		    vt_wait_flag(&t.done, BENCH_OP_MS) == -1 || !t.ok) {
			fprintf(stderr, "bench: snapshot: %s\n", cause ? cause : t.error);
			free(cause);
			free(id);
			break;
		}
		bench_add(snap, (vt_now() - t0) * 1000.0);
		dir = paths_data("snapshots/%s", id);
		stor_snapshot_remove(dir, NULL);
		free(dir);
		free(id);
		vt_run(50);
	}
	bench_finish(&t, &ss);
	free(rootfs);
}

#ifdef VM_SPARE_API
static int
spare_spawn(const char *rootfs, int memfd, int i, struct vt *t, struct stor_sandbox *ss,
    const char *sfx)
{
	char *cause = NULL;

	memset(t, 0, sizeof(*t));
	if (bench_sandbox(sfx, i, rootfs, ss) == -1)
		return -1;
	struct vm_config c = vt_config(ss->ss_name, ss, -1, -1, NULL);
	t->vm = vm_spawn_incoming(vt_base, &c, VM_RESTORE_SHARED, memfd, vt_event, vt_done, t,
	    &cause);
	if (t->vm == NULL) {
		fprintf(stderr, "bench: spare: %s\n", cause);
		free(cause);
		stor_sandbox_destroy(ss, NULL);
		return -1;
	}
	return 0;
}

/* One restore into a spare (run i): spawn, let it wait, vm_incoming. */
static int
bench_spare(const char *snapdir, int memfd, int i, struct series *ready_s,
    struct series *running, struct series *ready, struct series *mig)
{
	struct stor_sandbox ss;
	struct vt t;
	struct vm_timings tm;
	char *cause = NULL, *rootfs;
	double t0;
	int rc = -1;

	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	do {
		t0 = vt_now();
		if (spare_spawn(rootfs, memfd, i, &t, &ss, "spare") == -1)
			break;
		if (vt_wait_flag(&t.done, BENCH_OP_MS) == -1 || !t.ok) {
			fprintf(stderr, "bench: spare: %s\n", t.error);
			bench_finish(&t, &ss);
			break;
		}
		bench_add(ready_s, (vt_now() - t0) * 1000.0);
		/* A spare waits a while before a create needs it. */
		vt_run(300);
		t.done = 0;
		t0 = vt_now();
		if (vm_incoming(t.vm, snapdir, VM_RESTORE_SHARED, memfd, vt_done, &cause) == -1) {
			fprintf(stderr, "bench: incoming: %s\n", cause);
			free(cause);
			bench_finish(&t, &ss);
			break;
		}
		rc = 0;
		if (restored(&t, t0, running, ready, &tm))
			bench_add(mig, tm.running - tm.checked);
		bench_finish(&t, &ss);
	} while (0);
	free(rootfs);
	return rc;
}

static void
bench_spare_memory(const char *snapdir, int memfd, struct series *rss, struct series *pss)
{
	struct stor_sandbox ss[SPARES_MAX];
	struct vt t[SPARES_MAX];
	struct vm_stats st;
	char *rootfs;
	int i, n = nspares > SPARES_MAX ? SPARES_MAX : nspares, ok[SPARES_MAX];

	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	for (i = 0; i < n; i++)
		ok[i] = spare_spawn(rootfs, memfd, i, &t[i], &ss[i], "idle") == 0;
	for (i = 0; i < n; i++)
		if (ok[i] && (vt_wait_flag(&t[i].done, BENCH_OP_MS) == -1 || !t[i].ok))
			ok[i] = 0;
	for (i = 0; i < 20; i++)
		vt_run(50);
	for (i = 0; i < n; i++) {
		if (!ok[i])
			continue;
		vm_stats(t[i].vm, &st);
		bench_add(rss, (double)st.rss_kb / 1024.0);
		bench_add(pss, (double)st.pss_kb / 1024.0);
	}
	for (i = 0; i < n; i++)
		if (t[i].vm != NULL)
			bench_finish(&t[i], &ss[i]);
	free(rootfs);
}
#endif

int
main(int argc, char **argv)
{
	static struct series full_run = { .name = "full restore (spawn + incoming): to running", .unit = "ms" },
	    full_mig = { .name = "full restore: QMP ready to running (caps + device state + cont)", .unit = "ms" },
	    full_ready = { .name = "full restore: to agent PONG", .unit = "ms" },
	    snap = { .name = "snapshot of a running guest (stop to cont)", .unit = "ms" };
#ifdef VM_SPARE_API
	static struct series sp_wait = { .name = "spare: spawn to waiting (off the create path)", .unit = "ms" },
	    sp_run = { .name = "restore into a spare: to running", .unit = "ms" },
	    sp_ready = { .name = "restore into a spare: to agent PONG", .unit = "ms" },
	    sp_mig = { .name = "restore into a spare: getfd + migrate-incoming + event + cont", .unit = "ms" },
	    sp_rss = { .name = "idle spare VMM RSS", .unit = "MiB" },
	    sp_pss = { .name = "idle spare VMM PSS", .unit = "MiB" };
#endif
	char *snapdir;
	int ch, i, memfd = -1;

	while ((ch = getopt(argc, argv, "n:s:")) != -1) {
		switch (ch) {
		case 'n': runs = atoi(optarg); break;
		case 's': nspares = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: bench_spare [-n RUNS] [-s SPARES]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > BENCH_MAX)
		runs = 20;
	signal(SIGPIPE, SIG_IGN);
	snprintf(bench_tag, sizeof(bench_tag), "bsp%ld", (long)getpid());
	if (vt_setup() == -1)
		return 1;
	fprintf(stderr, "bench: accel %s, %d runs\n", accel_name(vt_ai.accel), runs);
	if ((snapdir = bench_base(&memfd)) == NULL)
		return 1;
	/* One VM at a time; full and spare alternate so both see the same load. */
	for (i = 0; i < runs; i++) {
		if (bench_full(snapdir, memfd, i, &full_run, &full_mig, &full_ready) == -1)
			break;
#ifdef VM_SPARE_API
		if (bench_spare(snapdir, memfd, i, &sp_wait, &sp_run, &sp_ready, &sp_mig) == -1)
			break;
#endif
	}
	bench_snapshot(snapdir, &snap);
#ifdef VM_SPARE_API
	bench_spare_memory(snapdir, memfd, &sp_rss, &sp_pss);
#endif
	close(memfd);
	stor_snapshot_remove(snapdir, NULL);
	free(snapdir);

	printf("| metric | median | p90 | runs |\n|---|---|---|---|\n");
	bench_report(&full_run);
	bench_report(&full_mig);
	bench_report(&full_ready);
#ifdef VM_SPARE_API
	bench_report(&sp_wait);
	bench_report(&sp_run);
	bench_report(&sp_mig);
	bench_report(&sp_ready);
#endif
	bench_report(&snap);
#ifdef VM_SPARE_API
	bench_report(&sp_rss);
	bench_report(&sp_pss);
#endif
	vt_teardown();
	return 0;
}
