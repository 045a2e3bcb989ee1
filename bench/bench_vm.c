/*
 * VM engine benchmarks (docs/performance.md, "VM engine"): jailed QEMU
 * microvm under whatever accelerator this host has, the base template.
 *
 *   cold boot   vm_boot() -> guest running, and -> agent ready line
 *   restore     vm_restore() -> running, for both memory modes, and
 *               -> agent answers a channel PING (when its agent speaks
 *               the channel protocol)
 *   pause/resume  QMP stop/cont round trips through the driver
 *   memory      RSS/PSS of the VMM per idle sandbox: booted, restored,
 *               and N concurrent shared-base clones
 *   agent wake  a restored guest left running idle (its agent waiting for
 *               a host), then connect -> PONG: how fast the agent notices
 *               the host (issue 13 item 7)
 *
 * Usage: bench_vm [-n RUNS] [-c CLONES] [-w]   (defaults 20, 4; -w: only
 * the base snapshot and the agent wake series)
 * Prints a markdown table: median and p90 per metric.
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

#define BENCH_PING_MS	3000
#define BENCH_POLL_MS	5	/* agent socket poll slice between loop turns */

static struct series ph_cold_spawn = { .name = "cold boot phase: jail set up, QEMU exec'd", .unit = "ms" },
    ph_cold_qmp = { .name = "cold boot phase: QMP ready", .unit = "ms" },
    ph_chk = { .name = "restore phase: header + devstate checksum (+ RAM reflink in own mode)", .unit = "ms" },
    ph_spawn = { .name = "restore phase: jail set up, QEMU exec'd", .unit = "ms" },
    ph_qmp = { .name = "restore phase: QMP ready", .unit = "ms" };
static int runs = 20, nclones = 4;

/* Idle memory of the VMM after settle_ms: RSS and PSS in MiB. */
static void
idle_memory(struct vt *t, int settle_ms, struct series *rss, struct series *pss)
{
	struct vm_stats st;
	double end = vt_now() + settle_ms / 1000.0;

	while (vt_now() < end)
		vt_run(50);
	vm_stats(t->vm, &st);
	bench_add(rss, (double)st.rss_kb / 1024.0);
	bench_add(pss, (double)st.pss_kb / 1024.0);
}

static void
bench_cold(struct series *running, struct series *ready, struct series *rss,
    struct series *pss)
{
	struct stor_sandbox ss;
	struct vt t;
	char *cause = NULL;
	int i;

	for (i = 0; i < runs; i++) {
		memset(&t, 0, sizeof(t));
		if (bench_sandbox("cold", i, vt_tp.rootfs, &ss) == -1)
			return;
		struct vm_config c = vt_config(ss.ss_name, &ss, -1, -1, NULL);
		double t0 = vt_now();
		t.vm = vm_boot(vt_base, &c, vt_event, vt_done, &t, &cause);
		if (t.vm == NULL) {
			fprintf(stderr, "bench: boot: %s\n", cause);
			free(cause);
			stor_sandbox_destroy(&ss, NULL);
			return;
		}
		if (vt_wait_flag(&t.done, BENCH_OP_MS) == 0 && t.ok) {
			struct vm_timings tm;

			bench_add(running, (vt_now() - t0) * 1000.0);
			vm_timings(t.vm, &tm);
			bench_add(&ph_cold_spawn, tm.spawned);
			bench_add(&ph_cold_qmp, tm.qmp_ready);
		}
		if (vt_wait_line(&t, 0, AGENT_READY_LINE, BENCH_BOOT_MS) >= 0) {
			bench_add(ready, (vt_now() - t0) * 1000.0);
			idle_memory(&t, 1000, rss, pss);
		}
		bench_finish(&t, &ss);
	}
}

static void
bench_restore(const char *snapdir, enum vm_restore_mem mode, int memfd,
    struct series *running, struct series *ready, struct series *rss, struct series *pss,
    struct vt *keep, struct stor_sandbox *keep_ss)
{
	struct stor_sandbox local_ss, *ss;
	struct vt local, *t;
	char *cause = NULL, *rootfs;
	int i, last;

	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	for (i = 0; i < runs; i++) {
		/* The last VM may be kept running: the callbacks hold t, so it must
		 * live where the caller can use it afterwards, never be copied. */
		last = keep != NULL && i == runs - 1;
		t = last ? keep : &local;
		ss = last ? keep_ss : &local_ss;
		memset(t, 0, sizeof(*t));
		if (bench_sandbox(mode == VM_RESTORE_OWN ? "own" : "shr", i, rootfs, ss) == -1)
			break;
		struct vm_config c = vt_config(ss->ss_name, ss, -1, -1, NULL);
		double t0 = vt_now();
		t->vm = vm_restore(vt_base, &c, snapdir, mode, memfd, vt_event, vt_done, t, &cause);
		if (t->vm == NULL) {
			fprintf(stderr, "bench: restore: %s\n", cause);
			free(cause);
			stor_sandbox_destroy(ss, NULL);
			break;
		}
		if (vt_wait_flag(&t->done, BENCH_OP_MS) == 0 && t->ok) {
			struct vm_timings tm;
			double ms;

			bench_add(running, (vt_now() - t0) * 1000.0);
			if (mode == VM_RESTORE_SHARED) {
				vm_timings(t->vm, &tm);
				bench_add(&ph_chk, tm.checked);
				bench_add(&ph_spawn, tm.spawned);
				bench_add(&ph_qmp, tm.qmp_ready);
			}
			if ((ms = bench_agent_ping_ms(t->vm, t0, BENCH_PING_MS, BENCH_POLL_MS)) >= 0)
				bench_add(ready, ms);
			idle_memory(t, 1000, rss, pss);
		}
		if (last && t->ok)
			break;
		bench_finish(t, ss);
	}
	free(rootfs);
}

/*
 * Restore, let the guest run idle for BENCH_WAKE_IDLE_MS (the agent is now
 * waiting on its port, as in a pool member after cont), then time the
 * host's connect -> HELLO -> PONG; disconnect, idle again, and time a
 * reconnect, when TCG has the agent's code translated: that one is the
 * agent's wake-up (probe timer or fd wake) plus one round trip. In the
 * first runs, also the VMM's CPU while the guest idles with no host (a
 * pool member's cost: a probe timer wakes the vCPU 50 times a second).
 */
#define BENCH_WAKE_IDLE_MS	300
#define BENCH_IDLE_RUNS		5
#define BENCH_IDLE_S		5
static void
bench_wake(const char *snapdir, int memfd, struct series *wake, struct series *wake2,
    struct series *idle_cpu)
{
	struct stor_sandbox ss;
	struct vt t;
	char *cause = NULL, *rootfs;
	double ms, end;
	int i;

	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	for (i = 0; i < runs; i++) {
		memset(&t, 0, sizeof(t));
		if (bench_sandbox("wake", i, rootfs, &ss) == -1)
			break;
		struct vm_config c = vt_config(ss.ss_name, &ss, -1, -1, NULL);
		t.vm = vm_restore(vt_base, &c, snapdir, VM_RESTORE_SHARED, memfd, vt_event, vt_done,
		    &t, &cause);
		if (t.vm == NULL) {
			fprintf(stderr, "bench: restore: %s\n", cause);
			free(cause);
			stor_sandbox_destroy(&ss, NULL);
			break;
		}
		if (vt_wait_flag(&t.done, BENCH_OP_MS) == 0 && t.ok) {
			end = vt_now() + BENCH_WAKE_IDLE_MS / 1000.0;
			while (vt_now() < end)
				vt_run(20);
			if ((ms = bench_agent_ping_ms(t.vm, vt_now(), BENCH_PING_MS, BENCH_POLL_MS)) >= 0)
				bench_add(wake, ms);
			/* Again, the agent's code now translated: the wake-up alone. */
			end = vt_now() + BENCH_WAKE_IDLE_MS / 1000.0;
			while (vt_now() < end)
				vt_run(20);
			if ((ms = bench_agent_ping_ms(t.vm, vt_now(), BENCH_PING_MS, BENCH_POLL_MS)) >= 0)
				bench_add(wake2, ms);
			/* An idle member with no host: what its waiting costs the host CPU. */
			if (i < BENCH_IDLE_RUNS && idle_cpu != NULL) {
				struct vm_stats a, b;
				double t0 = vt_now();

				vm_stats(t.vm, &a);
				end = t0 + BENCH_IDLE_S;
				while (vt_now() < end)
					vt_run(100);
				vm_stats(t.vm, &b);
				bench_add(idle_cpu, 100.0 * (b.cpu_seconds - a.cpu_seconds) / (vt_now() - t0));
			}
			vt_run(100);
			/* What the agent said about its port, once: how it waited. */
			for (int l = 0; i == 0 && l < t.nlines; l++)
				if (strstr(t.lines[l], "airlock-agent:") != NULL)
					fprintf(stderr, "bench: guest: %s\n", t.lines[l]);
		}
		bench_finish(&t, &ss);
	}
	free(rootfs);
}

static void
bench_pause(struct vt *t, struct series *pause, struct series *resume)
{
	char *cause = NULL;
	int i;

	for (i = 0; i < runs * 2; i++) {
		double t0 = vt_now();

		t->done = 0;
		if (vm_pause(t->vm, vt_done, &cause) == -1 || vt_wait_flag(&t->done, BENCH_OP_MS)) {
			fprintf(stderr, "bench: pause: %s\n", cause ? cause : t->error);
			break;
		}
		bench_add(pause, (vt_now() - t0) * 1000.0);
		t0 = vt_now();
		t->done = 0;
		if (vm_resume(t->vm, vt_done, &cause) == -1 || vt_wait_flag(&t->done, BENCH_OP_MS))
			break;
		bench_add(resume, (vt_now() - t0) * 1000.0);
		vt_run(20);
	}
	free(cause);
}

static void
bench_clones(const char *snapdir, int memfd, struct series *rss, struct series *pss,
    struct series *running)
{
	struct stor_sandbox ss[16];
	struct vt t[16];
	char *cause = NULL, *rootfs;
	int i, n = nclones > 16 ? 16 : nclones;
	double t0;

	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	memset(t, 0, sizeof(t));
	for (i = 0; i < n; i++)
		if (bench_sandbox("clone", i, rootfs, &ss[i]) == -1)
			n = i;
	t0 = vt_now();
	for (i = 0; i < n; i++) {
		struct vm_config c = vt_config(ss[i].ss_name, &ss[i], -1, -1, NULL);

		t[i].vm = vm_restore(vt_base, &c, snapdir, VM_RESTORE_SHARED, memfd, vt_event,
		    vt_done, &t[i], &cause);
		if (t[i].vm == NULL) {
			fprintf(stderr, "bench: clone %d: %s\n", i, cause);
			free(cause);
			cause = NULL;
		}
	}
	for (i = 0; i < n; i++)
		if (t[i].vm != NULL && vt_wait_flag(&t[i].done, BENCH_OP_MS) == 0 && t[i].ok)
			bench_add(running, (vt_now() - t0) * 1000.0);
	for (i = 0; i < 40; i++)
		vt_run(50);
	for (i = 0; i < n; i++) {
		struct vm_stats st;

		if (t[i].vm == NULL)
			continue;
		vm_stats(t[i].vm, &st);
		bench_add(rss, (double)st.rss_kb / 1024.0);
		bench_add(pss, (double)st.pss_kb / 1024.0);
	}
	for (i = 0; i < n; i++)
		bench_finish(&t[i], &ss[i]);
	free(rootfs);
}

int
main(int argc, char **argv)
{
	static struct series cold_run = { .name = "cold boot: spawn to running", .unit = "ms" },
	    cold_ready = { .name = "cold boot: spawn to agent ready line", .unit = "ms" },
	    cold_rss = { .name = "booted idle VMM RSS", .unit = "MiB" }, cold_pss = { .name = "booted idle VMM PSS", .unit = "MiB" },
	    own_run = { .name = "restore (own RAM file, reflink): to running", .unit = "ms" },
	    own_ready = { .name = "restore (own RAM file): to agent PONG", .unit = "ms" },
	    own_rss = { .name = "restored (own) idle VMM RSS", .unit = "MiB" },
	    own_pss = { .name = "restored (own) idle VMM PSS", .unit = "MiB" },
	    shr_run = { .name = "restore (shared sealed base): to running", .unit = "ms" },
	    shr_ready = { .name = "restore (shared base): to agent PONG", .unit = "ms" },
	    shr_rss = { .name = "restored (shared) idle VMM RSS", .unit = "MiB" },
	    shr_pss = { .name = "restored (shared) idle VMM PSS", .unit = "MiB" },
	    pause = { .name = "pause (QMP stop via driver)", .unit = "ms" },
	    resume = { .name = "resume (QMP cont via driver)", .unit = "ms" },
	    cl_run = { .name = "concurrent clones: all-start to each running", .unit = "ms" },
	    cl_rss = { .name = "concurrent shared clone idle RSS", .unit = "MiB" },
	    cl_pss = { .name = "concurrent shared clone idle PSS", .unit = "MiB" },
	    wake = { .name = "restored (shared) guest idle 300 ms: host connect to agent PONG",
		.unit = "ms" },
	    wake2 = { .name = "same guest, host gone 300 ms: reconnect to agent PONG", .unit = "ms" },
	    idle_cpu = { .name = "restored guest idle, no host connected: VMM CPU (5 s)",
		.unit = "% of a core" };
	struct stor_sandbox keep_ss;
	struct vt keep;
	char *snapdir;
	int ch, memfd = -1, wake_only = 0;

	while ((ch = getopt(argc, argv, "n:c:w")) != -1) {
		switch (ch) {
		case 'n': runs = atoi(optarg); break;
		case 'c': nclones = atoi(optarg); break;
		case 'w': wake_only = 1; break;
		default:
			fprintf(stderr, "usage: bench_vm [-n RUNS] [-c CLONES] [-w]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > BENCH_MAX / 2)
		runs = 20;
	signal(SIGPIPE, SIG_IGN);
	snprintf(bench_tag, sizeof(bench_tag), "bvm%ld", (long)getpid());
	if (vt_setup() == -1)
		return 1;
	fprintf(stderr, "bench: accel %s, %d runs\n", accel_name(vt_ai.accel), runs);
	double tb = vt_now();
#define PHASE(x) fprintf(stderr, "bench: %s done at %.1f s\n", x, vt_now() - tb)
	if (!wake_only) {
		bench_cold(&cold_run, &cold_ready, &cold_rss, &cold_pss);
		PHASE("cold boot");
	}
	if ((snapdir = bench_base(&memfd)) == NULL)
		return 1;
	PHASE("base snapshot + memfd");
	bench_wake(snapdir, memfd, &wake, &wake2, &idle_cpu);
	PHASE("agent wake");
	if (wake_only) {
		close(memfd);
		stor_snapshot_remove(snapdir, NULL);
		free(snapdir);
		printf("| metric | median | p90 | runs |\n|---|---|---|---|\n");
		bench_report(&wake);
		bench_report(&wake2);
		bench_report(&idle_cpu);
		vt_teardown();
		return 0;
	}
	memset(&keep, 0, sizeof(keep));
	bench_restore(snapdir, VM_RESTORE_OWN, -1, &own_run, &own_ready, &own_rss, &own_pss,
	    &keep, &keep_ss);
	bench_restore(snapdir, VM_RESTORE_SHARED, memfd, &shr_run, &shr_ready, &shr_rss, &shr_pss,
	    NULL, NULL);
	PHASE("restores");
	if (keep.vm != NULL) {
		bench_pause(&keep, &pause, &resume);
		bench_finish(&keep, &keep_ss);
	}
	PHASE("pause/resume");
	bench_clones(snapdir, memfd, &cl_rss, &cl_pss, &cl_run);
	PHASE("clones");
	close(memfd);
	stor_snapshot_remove(snapdir, NULL);
	free(snapdir);

	printf("| metric | median | p90 | runs |\n|---|---|---|---|\n");
	bench_report(&ph_cold_spawn);
	bench_report(&ph_cold_qmp);
	bench_report(&cold_run);
	bench_report(&cold_ready);
	bench_report(&ph_chk);
	bench_report(&ph_spawn);
	bench_report(&ph_qmp);
	bench_report(&own_run);
	bench_report(&own_ready);
	bench_report(&shr_run);
	bench_report(&shr_ready);
	bench_report(&cl_run);
	bench_report(&wake);
	bench_report(&wake2);
	bench_report(&idle_cpu);
	bench_report(&pause);
	bench_report(&resume);
	bench_report(&cold_rss);
	bench_report(&cold_pss);
	bench_report(&own_rss);
	bench_report(&own_pss);
	bench_report(&shr_rss);
	bench_report(&shr_pss);
	bench_report(&cl_rss);
	bench_report(&cl_pss);
	vt_teardown();
	return 0;
}
