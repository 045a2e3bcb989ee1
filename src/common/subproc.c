/* fork/exec helpers with captured output and clear failure causes. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/subproc.h"
#include "common/util.h"

extern char **environ;

static int
subproc_wait(pid_t pid, const char *name, const char *tail, char **cause)
{
	int status;

	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR) {
			cause_set(cause, "waitpid %s: %s", name, strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		cause_set(cause, "%s exited with status %d%s%s", name,
		    WEXITSTATUS(status), tail && *tail ? ":\n" : "", tail ? tail : "");
	else
		cause_set(cause, "%s killed by signal %d%s%s", name,
		    WTERMSIG(status), tail && *tail ? ":\n" : "", tail ? tail : "");
	return -1;
}

/* Read fd to EOF; keep the first max bytes (keep_head) or a rolling tail. */
static char *
drain_fd(int fd, size_t max, int keep_head)
{
	char *buf = xmalloc(max + 1), chunk[4096];
	size_t len = 0;
	ssize_t n;

	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (keep_head) {
			size_t take = (size_t)n < max - len ? (size_t)n : max - len;
			memcpy(buf + len, chunk, take);
			len += take;
			continue;
		}
		if ((size_t)n >= max) {
			memcpy(buf, chunk + n - max, max);
			len = max;
		} else {
			if (len + (size_t)n > max) {
				size_t drop = len + (size_t)n - max;
				memmove(buf, buf + drop, len - drop);
				len -= drop;
			}
			memcpy(buf + len, chunk, (size_t)n);
			len += (size_t)n;
		}
	}
	buf[len] = '\0';
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	return buf;
}

static int
subproc_start(const char *const argv[], char *const envp[], int outfd, int errfd,
    pid_t *pid, char **cause)
{
	posix_spawn_file_actions_t fa;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (outfd != -1)
		posix_spawn_file_actions_adddup2(&fa, outfd, STDOUT_FILENO);
	if (errfd != -1)
		posix_spawn_file_actions_adddup2(&fa, errfd, STDERR_FILENO);
	rc = posix_spawnp(pid, argv[0], &fa, NULL, (char *const *)argv,
	    envp ? envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		cause_set(cause, "cannot run %s: %s", argv[0], strerror(rc));
		return -1;
	}
	return 0;
}

int
subproc_run(const char *const argv[], char *const envp[], enum subproc_output mode,
    char **cause)
{
	char *tail = NULL;
	pid_t pid;
	int p[2], rc;

	if (mode == SUBPROC_OUTPUT_INHERIT) {
		if (subproc_start(argv, envp, -1, -1, &pid, cause) == -1)
			return -1;
		return subproc_wait(pid, argv[0], NULL, cause);
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		cause_set(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	rc = subproc_start(argv, envp, p[1], p[1], &pid, cause);
	close(p[1]);
	if (rc == -1) {
		close(p[0]);
		return -1;
	}
	tail = drain_fd(p[0], SUBPROC_TAIL_MAX, 0);
	close(p[0]);
	rc = subproc_wait(pid, argv[0], tail, cause);
	free(tail);
	return rc;
}

int
subproc_capture(const char *const argv[], size_t max, char **out, char **cause)
{
	char *buf;
	pid_t pid;
	int p[2], rc;

	if (pipe2(p, O_CLOEXEC) == -1) {
		cause_set(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	rc = subproc_start(argv, NULL, p[1], -1, &pid, cause);
	close(p[1]);
	if (rc == -1) {
		close(p[0]);
		return -1;
	}
	buf = drain_fd(p[0], max, 1);
	close(p[0]);
	if (subproc_wait(pid, argv[0], NULL, cause) == -1) {
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}
