/* Start QEMU, watch its console for a line, stop it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "vm/vm_boot.h"

extern char **environ;

#define VM_BOOT_POLL_MS	20

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int
vm_boot_start(const struct vm_spec *spec, pid_t *pid, char **cause)
{
	posix_spawn_file_actions_t fa;
	struct argv a;
	char *errlog;
	int rc;

	if (qemu_argv_build(spec, &a, cause) == -1)
		return -1;
	xasprintf(&errlog, "%s.qemu", spec->console_log);
	/* QEMU appends to the console file; start from an empty one. */
	if (truncate(spec->console_log, 0) == -1 && errno != ENOENT) {
		cause_set(cause, "truncate %s: %s", spec->console_log, strerror(errno));
		free(errlog);
		argv_free(&a);
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, errlog,
	    O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
	rc = posix_spawnp(pid, a.av[0], &fa, NULL, a.av, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		cause_set(cause, "cannot start %s: %s (is qemu-system-x86 installed?)",
		    a.av[0], strerror(rc));
	free(errlog);
	argv_free(&a);
	return rc == 0 ? 0 : -1;
}

char *
vm_boot_tail(const char *path, size_t len)
{
	struct stat st;
	char *buf;
	ssize_t n;
	off_t off;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return xstrdup("");
	if (fstat(fd, &st) == -1) {
		close(fd);
		return xstrdup("");
	}
	off = st.st_size > (off_t)len ? st.st_size - (off_t)len : 0;
	buf = xmalloc(len + 1);
	n = pread(fd, buf, len, off);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Search the console log for needle, reading only what was appended. */
static int
console_has(const char *path, const char *needle, off_t *scanned)
{
	char buf[8192];
	size_t keep = strlen(needle);
	ssize_t n;
	int fd, found = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	/* Re-read a needle's length of overlap so a line split across reads is found. */
	off_t off = *scanned > (off_t)keep ? *scanned - (off_t)keep : 0;
	while ((n = pread(fd, buf, sizeof(buf) - 1, off)) > 0) {
		buf[n] = '\0';
		if (memmem(buf, (size_t)n, needle, keep) != NULL) {
			found = 1;
			break;
		}
		off += n;
		*scanned = off;
		if ((size_t)n > keep)
			off -= (off_t)keep;
		else
			break;
	}
	close(fd);
	return found;
}

int
vm_boot_wait_line(pid_t pid, const char *console_log, const char *needle,
    int timeout_ms, char **cause)
{
	uint64_t deadline = monotonic_ms() + (uint64_t)timeout_ms;
	off_t scanned = 0;
	char *tail, *errtail, *errlog;
	int status;
	pid_t r;

	for (;;) {
		if (console_has(console_log, needle, &scanned))
			return 0;
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			/* Read once more: the line may have landed just before exit. */
			if (console_has(console_log, needle, &scanned))
				return 0;
			xasprintf(&errlog, "%s.qemu", console_log);
			tail = vm_boot_tail(console_log, VM_BOOT_CONSOLE_TAIL);
			errtail = vm_boot_tail(errlog, 1024);
			cause_set(cause, "QEMU exited (status %d) before \"%s\"; "
			    "console tail:\n%s\nqemu stderr:\n%s",
			    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			    needle, tail, errtail);
			free(tail);
			free(errtail);
			free(errlog);
			return -1;
		}
		if (monotonic_ms() >= deadline) {
			tail = vm_boot_tail(console_log, VM_BOOT_CONSOLE_TAIL);
			cause_set(cause, "no \"%s\" on the console within %d ms; console tail:\n%s",
			    needle, timeout_ms, tail);
			free(tail);
			return -1;
		}
		sleep_ms(VM_BOOT_POLL_MS);
	}
}

int
vm_boot_wait_exit(pid_t pid, int timeout_ms, int *status)
{
	uint64_t deadline = monotonic_ms() + (uint64_t)timeout_ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r == -1 && errno != EINTR)
			return -1;
		if (monotonic_ms() >= deadline)
			return -1;
		sleep_ms(VM_BOOT_POLL_MS);
	}
}

int
vm_boot_kill(pid_t pid)
{
	int status;

	if (kill(pid, SIGKILL) == -1 && errno == ESRCH)
		return -1;
	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR)
			return -1;
	}
	return status;
}
