/*
 * Agent channel latency: round trip of a tiny exec (`true`, Process.Start
 * to end-stream) and of channel PINGs, with the agent on the host
 * (--host AGENT_HOST_BIN) or as PID 1 of a base-template microVM (default).
 * Prints a markdown table of median/p90/min/max in ms.
 *
 *   bench_agent [-n RUNS] [--host AGENT_HOST_BIN] AGENTCTL_BIN
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/agent/agent_console.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/template.h"
#include "vm/accel.h"
#include "vm/vm_boot.h"
#include "../tests/lib/agent_harness.h"

static int
dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), dcmp);
	printf("| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", what, n, v[n / 2], v[n * 9 / 10], v[0],
	    v[n - 1]);
	fflush(stdout);
}

static int
bench_exec(const char *api, int n, const char *what)
{
	double *v = xcalloc((size_t)n, sizeof(double)), t0;
	struct ah_run run;
	int i, ok = 1;

	/* Warm up: page cache, TCG translation, the agent's first fork. */
	for (i = 0; i < 5; i++) {
		ah_exec(api, "{\"process\":{\"cmd\":\"true\"}}", NULL, &run);
		ah_run_free(&run);
	}
	for (i = 0; i < n; i++) {
		t0 = ah_now_ms();
		if (ah_exec(api, "{\"process\":{\"cmd\":\"true\"}}", NULL, &run) == -1 || !run.ended ||
		    run.exit_code != 0) {
			ok = 0;
			ah_run_free(&run);
			break;
		}
		v[i] = ah_now_ms() - t0;
		ah_run_free(&run);
	}
	if (ok)
		report(what, v, n);
	free(v);
	return ok ? 0 : -1;
}

/* agentctl ping prints "ping: n=.. min=.. median=.. p90=.. max=.. ms". */
static void
bench_ping(const char *ctl, const char *sock, int n, const char *what)
{
	char cmd[1024], line[256];
	double mn, med, p90, mx;
	int cnt;
	FILE *fp;

	snprintf(cmd, sizeof(cmd), "%s -s %s ping -n %d", ctl, sock, n);
	if ((fp = popen(cmd, "r")) == NULL)
		return;
	if (fgets(line, sizeof(line), fp) != NULL &&
	    sscanf(line, "ping: n=%d min=%lf median=%lf p90=%lf max=%lf", &cnt, &mn, &med, &p90,
	    &mx) == 5)
		printf("| %s | %d | %.3f | %.3f | %.3f | %.3f |\n", what, cnt, med, p90, mn, mx);
	pclose(fp);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	const char *host_bin = NULL, *ctl;
	char *dir, *chan, *api, *spec, *fargv[8], *aargv[8], *rootfs, *console, *cause = NULL;
	struct template_paths tp;
	struct accel_info ai;
	struct vm_spec s;
	pid_t agent = -1, fwd, qemu = -1;
	int n = 200, i;

	for (i = 1; i < argc - 1; i++) {
		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc - 1)
			n = atoi(argv[++i]);
		else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc - 1)
			host_bin = argv[++i];
		else
			break;
	}
	if (i != argc - 1 || n <= 0) {
		fprintf(stderr, "usage: bench_agent [-n RUNS] [--host AGENT_HOST_BIN] AGENTCTL_BIN\n");
		return 2;
	}
	ctl = argv[argc - 1];
	signal(SIGPIPE, SIG_IGN);
	dir = paths_data("run/bench-agent-%ld", (long)getpid());
	if (mkdir_p(dir, 0700, &cause) == -1)
		fatalx("%s", cause);
	xasprintf(&chan, "%s/chan.sock", dir);
	xasprintf(&api, "%s/api.sock", dir);
	if (host_bin != NULL) {
		aargv[0] = (char *)host_bin; aargv[1] = "--listen"; aargv[2] = chan;
		aargv[3] = "--default-user"; aargv[4] = "root"; aargv[5] = NULL;
		if ((agent = ah_spawn(aargv, AGENT_READY_LINE, NULL)) <= 0)
			fatalx("agent did not start");
	} else {
		if (template_paths("base", &tp, &cause) == -1 ||
		    accel_detect(VM_ACCEL_AUTO, &ai, &cause) == -1)
			fatalx("%s", cause);
		xasprintf(&rootfs, "%s/rootfs.ext4", dir);
		xasprintf(&console, "%s/console.log", dir);
		if (reflink_copy(tp.rootfs, rootfs, &cause) == -1)
			fatalx("%s", cause);
		memset(&s, 0, sizeof(s));
		s.accel = ai.accel;
		s.tsc_khz = ai.tsc_khz;
		s.vcpus = 2;
		s.memory_mb = 256;
		s.kernel = tp.kernel;
		s.initrd = tp.initrd;
		s.rootfs = rootfs;
		s.console_log = console;
		s.agent_socket = chan;
		s.no_reboot = 1;
		if (vm_boot_start(&s, &qemu, &cause) == -1 ||
		    vm_boot_wait_line(qemu, console, AGENT_READY_LINE, 180000, &cause) == -1)
			fatalx("boot: %s", cause);
	}
	printf("| %s, %s | runs | median ms | p90 ms | min ms | max ms |\n|---|---|---|---|---|---|\n",
	    host_bin != NULL ? "agent on the host" : "agent in a TCG microVM", "round trip");
	bench_ping(ctl, chan, n, "channel PING/PONG");
	xasprintf(&spec, "unix:%s=49983", api);
	fargv[0] = (char *)ctl; fargv[1] = "-s"; fargv[2] = chan; fargv[3] = "forward";
	fargv[4] = "-L"; fargv[5] = spec; fargv[6] = NULL;
	if ((fwd = ah_spawn(fargv, "forwarding ready", NULL)) <= 0)
		fatalx("forwarder did not start");
	{
		struct hresp r;

		/* HTTP GET /health over a fresh stream: open + request + answer. */
		double *v = xcalloc((size_t)n, sizeof(double)), t0;

		for (i = 0; i < n; i++) {
			t0 = ah_now_ms();
			if (ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == -1 || r.status != 204)
				fatalx("health failed");
			v[i] = ah_now_ms() - t0;
			ah_resp_free(&r);
		}
		report("GET /health (new stream each)", v, n);
		free(v);
	}
	if (bench_exec(api, n, "exec `true` (Process.Start to end-stream)") == -1)
		fprintf(stderr, "exec failed\n");
	{
		/* The guest's own cost of fork+exec of /bin/true, without the agent. */
		struct ah_run run;
		double v[10], t0;
		int k;

		for (k = 0; k < 10; k++) {
			t0 = ah_now_ms();
			if (ah_exec(api, "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
			    "\"i=0; while [ $i -lt 50 ]; do /bin/true; i=$((i+1)); done\"]}}", NULL,
			    &run) == -1 || !run.ended) {
				ah_run_free(&run);
				break;
			}
			v[k] = (ah_now_ms() - t0) / 50;
			ah_run_free(&run);
		}
		if (k == 10)
			report("fork+exec of /bin/true by a shell in the guest (per iteration of 50)", v, 10);
	}
	ah_kill(fwd);
	if (agent > 0)
		ah_kill(agent);
	if (qemu > 0)
		vm_boot_kill(qemu);
	remove_tree(dir, NULL);
	return 0;
}
