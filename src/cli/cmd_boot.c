/*
 * airlock boot: boot a template in the foreground on a throwaway CoW copy
 * of its rootfs and report when the agent is ready. Used by make up before
 * the daemon exists, and as a quick "does this host run microVMs" check.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/agent/agent_console.h"
#include "cli/cli.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/template.h"
#include "vm/accel.h"
#include "vm/vm_boot.h"

static volatile sig_atomic_t boot_stop;

static void
boot_sig(int sig)
{
	boot_stop = 1;
}

int
cmd_boot(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "template", required_argument, NULL, 't' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "keep", no_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 }
	};
	const char *tmpl = "base";
	struct template_paths tp;
	struct accel_info ai;
	struct vm_spec spec;
	double t0;
	char *cause = NULL, *dir = NULL, *rootfs = NULL, *console = NULL;
	int ch, timeout_s = 120, keep = 0, rc = 1;
	pid_t pid = -1;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "t:T:k", longopts, NULL)) != -1) {
		switch (ch) {
		case 't': tmpl = optarg; break;
		case 'T': timeout_s = atoi(optarg); break;
		case 'k': keep = 1; break;
		default:
			fprintf(stderr, "usage: airlock boot [--template NAME] [--timeout S] [--keep]\n");
			return 2;
		}
	}
	if (timeout_s <= 0 || timeout_s > 3600) {
		fprintf(stderr, "airlock: --timeout must be 1..3600 seconds\n");
		return 2;
	}
	if (template_paths(tmpl, &tp, &cause) == -1)
		goto fail;
	if (accel_detect(VM_ACCEL_AUTO, &ai, &cause) == -1)
		goto fail;
	dir = paths_data("run/boot-%ld", (long)getpid());
	if (mkdir_p(dir, 0700, &cause) == -1)
		goto fail;
	xasprintf(&rootfs, "%s/rootfs.ext4", dir);
	xasprintf(&console, "%s/console.log", dir);
	if (reflink_copy(tp.rootfs, rootfs, &cause) == -1)
		goto fail;
	memset(&spec, 0, sizeof(spec));
	spec.accel = ai.accel;
	spec.tsc_khz = ai.tsc_khz;
	spec.vcpus = 2;
	spec.memory_mb = 512;
	spec.kernel = tp.kernel;
	spec.initrd = tp.initrd;
	spec.rootfs = rootfs;
	spec.console_log = console;
	spec.no_reboot = 1;
	printf("booting template \"%s\" (%s: %s)\n", tmpl, accel_name(ai.accel), ai.reason);
	fflush(stdout);
	t0 = monotonic_secs();
	if (vm_boot_start(&spec, &pid, &cause) == -1 ||
	    vm_boot_wait_line(pid, console, AGENT_READY_LINE, timeout_s * 1000, &cause) == -1)
		goto fail;
	printf("guest agent ready after %.2fs (console: %s)\n", monotonic_secs() - t0, console);
	fflush(stdout);
	if (keep) {
		printf("VM running (pid %ld); press Ctrl-C to stop it\n", (long)pid);
		fflush(stdout);
		signal(SIGINT, boot_sig);
		signal(SIGTERM, boot_sig);
		while (!boot_stop && waitpid(pid, NULL, WNOHANG) == 0)
			sleep(1);
	}
	rc = 0;
fail:
	if (cause != NULL) {
		fprintf(stderr, "airlock: boot: %s\n", cause);
		free(cause);
	}
	if (pid > 0)
		vm_boot_kill(pid);
	if (dir != NULL && rc == 0)
		remove_tree(dir, NULL);
	else if (dir != NULL)
		fprintf(stderr, "airlock: boot files kept for inspection in %s\n", dir);
	free(dir);
	free(rootfs);
	free(console);
	template_paths_free(&tp);
	return rc;
}
