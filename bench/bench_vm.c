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
 *
 * Usage: bench_vm [-n RUNS] [-c CLONES]   (defaults 20, 4)
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
#include "../tests/integration/vmtest.h"

#define BENCH_BOOT_MS	180000
#define BENCH_OP_MS	60000
#define BENCH_PING_MS	3000
#define BENCH_MAX	1000

struct series {
	const char	*name;
	const char	*unit;
	double		 v[BENCH_MAX];
	int		 n;
};

static char tag[32];
static struct series ph_cold_spawn = { .name = "cold boot phase: jail set up, QEMU exec'd", .unit = "ms" },
    ph_cold_qmp = { .name = "cold boot phase: QMP ready", .unit = "ms" },
    ph_chk = { .name = "restore phase: header + devstate checksum (+ RAM reflink in own mode)", .unit = "ms" },
    ph_spawn = { .name = "restore phase: jail set up, QEMU exec'd", .unit = "ms" },
    ph_qmp = { .name = "restore phase: QMP ready", .unit = "ms" };
static int runs = 20, nclones = 4;

static void
add(struct series *s, double v)
{
	if (s->n < BENCH_MAX)
		s->v[s->n++] = v;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
report(struct series *s)
{
	double med, p90;

	if (s->n == 0) {
		printf("| %s | n/a | n/a | 0 |\n", s->name);
		return;
	}
	qsort(s->v, (size_t)s->n, sizeof(double), cmp_double);
	med = s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
	p90 = s->v[(int)((s->n - 1) * 0.9 + 0.5)];
	printf("| %s | %.1f %s | %.1f %s | %d |\n", s->name, med, s->unit, p90, s->unit, s->n);
	fflush(stdout);
}

static int
sandbox(const char *suffix, int i, const char *rootfs, struct stor_sandbox *ss)
{
	char *name, *cause = NULL;
	int rc;

	xasprintf(&name, "%s-%s%d", tag, suffix, i);
	rc = stor_sandbox_create(name, rootfs, 256ULL << 20, ss, &cause);
	if (rc == -1) {
		fprintf(stderr, "bench: %s\n", cause);
		free(cause);
	}
	free(name);
	return rc;
}

static void
finish(struct vt *t, struct stor_sandbox *ss)
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

/* Idle memory of the VMM after settle_ms: RSS and PSS in MiB. */
static void
idle_memory(struct vt *t, int settle_ms, struct series *rss, struct series *pss)
{
	struct vm_stats st;
	double end = vt_now() + settle_ms / 1000.0;

	while (vt_now() < end)
		vt_run(50);
	vm_stats(t->vm, &st);
	add(rss, (double)st.rss_kb / 1024.0);
	add(pss, (double)st.pss_kb / 1024.0);
}

/*
 * Agent readiness after a restore: HELLO + PING on the agent socket until a
 * PONG comes back. Returns ms, or -1 when the agent does not answer.
 */
static double
agent_ping_ms(struct vm *vm, double t0)
{
	uint8_t out[2 * CHAN_CTL_MAX + 8], in[4096];
	size_t olen, ilen = 0;
	struct pollfd pfd;
	double end = vt_now() + BENCH_PING_MS / 1000.0;
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

		/* Keep the driver's loop turning: the console must be drained. */
		event_base_loop(vt_base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, 5) <= 0)
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
		if (sandbox("cold", i, vt_tp.rootfs, &ss) == -1)
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

			add(running, (vt_now() - t0) * 1000.0);
			vm_timings(t.vm, &tm);
			add(&ph_cold_spawn, tm.spawned);
			add(&ph_cold_qmp, tm.qmp_ready);
		}
		if (vt_wait_line(&t, 0, AGENT_READY_LINE, BENCH_BOOT_MS) >= 0) {
			add(ready, (vt_now() - t0) * 1000.0);
			idle_memory(&t, 1000, rss, pss);
		}
		finish(&t, &ss);
	}
}

/* Boot once to agent-ready and suspend it into the base snapshot. */
static char *
make_base(void)
{
	struct stor_sandbox ss;
	struct vt t;
	char *cause = NULL, *id, *dir = NULL;

	memset(&t, 0, sizeof(t));
	if (sandbox("base", 0, vt_tp.rootfs, &ss) == -1)
		return NULL;
	struct vm_config c = vt_config(ss.ss_name, &ss, -1, -1, NULL);
	t.vm = vm_boot(vt_base, &c, vt_event, vt_done, &t, &cause);
	if (t.vm == NULL || vt_wait_line(&t, 0, AGENT_READY_LINE, BENCH_BOOT_MS) < 0) {
		fprintf(stderr, "bench: base boot failed: %s\n", cause ? cause : "no ready line");
		free(cause);
		finish(&t, &ss);
		return NULL;
	}
	vt_run(500);
	xasprintf(&id, "%s-base", tag);
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
	finish(&t, &ss);
	return dir;
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
		if (sandbox(mode == VM_RESTORE_OWN ? "own" : "shr", i, rootfs, ss) == -1)
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

			add(running, (vt_now() - t0) * 1000.0);
			if (mode == VM_RESTORE_SHARED) {
				vm_timings(t->vm, &tm);
				add(&ph_chk, tm.checked);
				add(&ph_spawn, tm.spawned);
				add(&ph_qmp, tm.qmp_ready);
			}
			if ((ms = agent_ping_ms(t->vm, t0)) >= 0)
				add(ready, ms);
			idle_memory(t, 1000, rss, pss);
		}
		if (last && t->ok)
			break;
		finish(t, ss);
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
		add(pause, (vt_now() - t0) * 1000.0);
		t0 = vt_now();
		t->done = 0;
		if (vm_resume(t->vm, vt_done, &cause) == -1 || vt_wait_flag(&t->done, BENCH_OP_MS))
			break;
		add(resume, (vt_now() - t0) * 1000.0);
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
		if (sandbox("clone", i, rootfs, &ss[i]) == -1)
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
			add(running, (vt_now() - t0) * 1000.0);
	for (i = 0; i < 40; i++)
		vt_run(50);
	for (i = 0; i < n; i++) {
		struct vm_stats st;

		if (t[i].vm == NULL)
			continue;
		vm_stats(t[i].vm, &st);
		add(rss, (double)st.rss_kb / 1024.0);
		add(pss, (double)st.pss_kb / 1024.0);
	}
	for (i = 0; i < n; i++)
		finish(&t[i], &ss[i]);
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
	    cl_pss = { .name = "concurrent shared clone idle PSS", .unit = "MiB" };
	struct stor_snap_header h;
	struct stor_sandbox keep_ss;
	struct vt keep;
	char *snapdir, *cause = NULL;
	int ch, memfd = -1;

	while ((ch = getopt(argc, argv, "n:c:")) != -1) {
		switch (ch) {
		case 'n': runs = atoi(optarg); break;
		case 'c': nclones = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: bench_vm [-n RUNS] [-c CLONES]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > BENCH_MAX / 2)
		runs = 20;
	signal(SIGPIPE, SIG_IGN);
	snprintf(tag, sizeof(tag), "bvm%ld", (long)getpid());
	if (vt_setup() == -1)
		return 1;
	fprintf(stderr, "bench: accel %s, %d runs\n", accel_name(vt_ai.accel), runs);
	double tb = vt_now();
#define PHASE(x) fprintf(stderr, "bench: %s done at %.1f s\n", x, vt_now() - tb)
	bench_cold(&cold_run, &cold_ready, &cold_rss, &cold_pss);
	PHASE("cold boot");
	if ((snapdir = make_base()) == NULL)
		return 1;
	if (stor_snapshot_load(snapdir, &h, &cause) == -1 ||
	    stor_snapshot_memfd(snapdir, h.mem_size, &memfd, &cause) == -1) {
		fprintf(stderr, "bench: %s\n", cause);
		return 1;
	}
	stor_snap_header_free(&h);
	PHASE("base snapshot + memfd");
	memset(&keep, 0, sizeof(keep));
	bench_restore(snapdir, VM_RESTORE_OWN, -1, &own_run, &own_ready, &own_rss, &own_pss,
	    &keep, &keep_ss);
	bench_restore(snapdir, VM_RESTORE_SHARED, memfd, &shr_run, &shr_ready, &shr_rss, &shr_pss,
	    NULL, NULL);
	PHASE("restores");
	if (keep.vm != NULL) {
		bench_pause(&keep, &pause, &resume);
		finish(&keep, &keep_ss);
	}
	PHASE("pause/resume");
	bench_clones(snapdir, memfd, &cl_rss, &cl_pss, &cl_run);
	PHASE("clones");
	close(memfd);
	stor_snapshot_remove(snapdir, NULL);
	free(snapdir);

	printf("| metric | median | p90 | runs |\n|---|---|---|---|\n");
	report(&ph_cold_spawn);
	report(&ph_cold_qmp);
	report(&cold_run);
	report(&cold_ready);
	report(&ph_chk);
	report(&ph_spawn);
	report(&ph_qmp);
	report(&own_run);
	report(&own_ready);
	report(&shr_run);
	report(&shr_ready);
	report(&cl_run);
	report(&pause);
	report(&resume);
	report(&cold_rss);
	report(&cold_pss);
	report(&own_rss);
	report(&own_pss);
	report(&shr_rss);
	report(&shr_pss);
	report(&cl_rss);
	report(&cl_pss);
	vt_teardown();
	return 0;
}
