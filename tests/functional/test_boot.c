/*
 * Boot test: the base template boots in QEMU microvm (TCG here) to the
 * agent's readiness line, and a broken rootfs, agent path or initramfs makes
 * the boot fail with the reason on the console instead of hanging.
 * Needs the data dir from scripts/setup.sh (kernel, initramfs, base template).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/agent/agent_console.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/template.h"
#include "vm/accel.h"
#include "vm/vm_boot.h"
#include "../unit/t.h"

/* Generous: TCG on a loaded 2-core CI box. Only a hang would reach it. */
#define BOOT_TIMEOUT_MS		180000

static struct template_paths tp;
static struct accel_info ai;
static char *workdir;

static struct vm_spec
spec_for(const char *rootfs, const char *initrd, const char *append, const char *console)
{
	struct vm_spec s;

	memset(&s, 0, sizeof(s));
	s.accel = ai.accel;
	s.tsc_khz = ai.tsc_khz;
	s.vcpus = 2;
	s.memory_mb = 256;
	s.kernel = tp.kernel;
	s.initrd = initrd;
	s.append = append;
	s.rootfs = rootfs;
	s.console_log = console;
	s.no_reboot = 1;
	return s;
}

/* Boot; return 0 if the ready line appeared, else -1 with *cause set. */
static int
boot(const char *tag, const char *rootfs, const char *initrd, const char *append,
    char **console_out, char **cause)
{
	struct vm_spec s;
	struct timespec t0, t1;
	char *console;
	pid_t pid;
	int rc;

	xasprintf(&console, "%s/%s.console", workdir, tag);
	s = spec_for(rootfs, initrd, append, console);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (vm_boot_start(&s, &pid, cause) == -1) {
		*console_out = console;
		return -1;
	}
	rc = vm_boot_wait_line(pid, console, AGENT_READY_LINE, BOOT_TIMEOUT_MS, cause);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "   %s: %s after %.2fs\n", tag, rc == 0 ? "ready" : "no ready line",
	    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	/* Broken boots must end on their own (poweroff/panic), not hang. */
	if (rc == -1 && waitpid(pid, NULL, WNOHANG) == 0)
		vm_boot_kill(pid);
	else if (rc == 0)
		vm_boot_kill(pid);
	*console_out = console;
	return rc;
}

static char *
clone_rootfs(const char *tag)
{
	char *p, *cause = NULL;

	xasprintf(&p, "%s/%s.ext4", workdir, tag);
	if (reflink_copy(tp.rootfs, p, &cause) == -1) {
		fprintf(stderr, "clone rootfs: %s\n", cause);
		free(cause);
		exit(1);
	}
	return p;
}

static int
console_contains(const char *console, const char *needle)
{
	char *text = NULL;
	int found;

	if (read_file(console, 16 * 1024 * 1024, &text, NULL, NULL) == -1)
		return 0;
	found = strstr(text, needle) != NULL;
	free(text);
	return found;
}

static void
test_boot_base(void)
{
	char *rootfs = clone_rootfs("good"), *console = NULL, *cause = NULL;

	CHECK(boot("good", rootfs, tp.initrd, NULL, &console, &cause) == 0);
	if (cause != NULL)
		fprintf(stderr, "%s\n", cause);
	CHECK(console_contains(console, AGENT_READY_LINE));
	CHECK(!console_contains(console, "airlock-init: FATAL"));
	free(rootfs);
	free(console);
	free(cause);
}

static void
test_broken_rootfs(void)
{
	char *rootfs, *console = NULL, *cause = NULL;
	int fd;

	xasprintf(&rootfs, "%s/zero.ext4", workdir);
	fd = open(rootfs, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd != -1 && ftruncate(fd, 64 * 1024 * 1024) == 0);
	close(fd);
	CHECK(boot("badroot", rootfs, tp.initrd, NULL, &console, &cause) == -1);
	CHECK_CAUSE(cause, "QEMU exited");
	CHECK(console_contains(console, "airlock-init: FATAL: mount root /dev/vda"));
	free(rootfs);
	free(console);
	free(cause);
}

static void
test_missing_agent(void)
{
	char *rootfs = clone_rootfs("noagent"), *console = NULL, *cause = NULL;

	CHECK(boot("noagent", rootfs, tp.initrd, "airlock.init=/nonexistent/agent",
	    &console, &cause) == -1);
	CHECK_CAUSE(cause, "QEMU exited");
	CHECK(console_contains(console, "airlock-init: FATAL: agent /nonexistent/agent"));
	free(rootfs);
	free(console);
	free(cause);
}

static void
test_broken_initramfs(void)
{
	char *rootfs = clone_rootfs("badinitrd"), *initrd, *console = NULL, *cause = NULL;

	xasprintf(&initrd, "%s/garbage.cpio", workdir);
	CHECK(write_file_atomic(initrd, "this is not a cpio archive\n", 27, 0644, &cause) == 0);
	CHECK(boot("badinitrd", rootfs, initrd, NULL, &console, &cause) == -1);
	CHECK_CAUSE(cause, "QEMU exited");
	free(initrd);
	free(rootfs);
	free(console);
	free(cause);
}

int
main(void)
{
	char *cause = NULL;

	if (template_paths("base", &tp, &cause) == -1) {
		fprintf(stderr, "test_boot: %s\n", cause);
		return 1;
	}
	if (accel_detect(VM_ACCEL_AUTO, &ai, &cause) == -1) {
		fprintf(stderr, "test_boot: %s\n", cause);
		return 1;
	}
	fprintf(stderr, "accel %s (%s), tsc %lu kHz\n", accel_name(ai.accel), ai.reason,
	    ai.tsc_khz);
	workdir = paths_data("run/test-boot-%ld", (long)getpid());
	if (mkdir_p(workdir, 0700, &cause) == -1) {
		fprintf(stderr, "test_boot: %s\n", cause);
		return 1;
	}
	T_RUN(test_boot_base);
	T_RUN(test_broken_rootfs);
	T_RUN(test_missing_agent);
	T_RUN(test_broken_initramfs);
	if (t_failed == 0)
		remove_tree(workdir, NULL);
	else
		fprintf(stderr, "consoles kept in %s\n", workdir);
	free(workdir);
	template_paths_free(&tp);
	return t_done();
}
