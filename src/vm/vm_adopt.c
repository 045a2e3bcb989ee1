/* Find and verify a jailed VMM left running by a previous airlockd (vm_adopt.h). */
#include <sys/stat.h>
#include <sys/syscall.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "vm/vm_adopt.h"
#include "vm/vm_jail.h"

/* The argument after flag, or NULL. */
static const char *
arg_after(const char **av, int ac, const char *flag)
{
	int i;

	for (i = 1; i + 1 < ac; i++)
		if (strcmp(av[i], flag) == 0)
			return av[i + 1];
	return NULL;
}

static int
arg_present(const char **av, int ac, const char *flag)
{
	int i;

	for (i = 1; i < ac; i++)
		if (strcmp(av[i], flag) == 0)
			return 1;
	return 0;
}

static int
parse_unsigned(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0 || v > 1048576)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int
vm_proc_check_cmdline(const char *cmd, size_t len, const char *name, struct vm_proc *vp,
    char **cause)
{
	const char *av[256], *p, *qmp, *obj, *base;
	int ac = 0, i;

	/* /proc/PID/cmdline: arguments each followed by a NUL. */
	for (p = cmd; p < cmd + len && ac < (int)(sizeof(av) / sizeof(av[0])); p += strlen(p) + 1)
		av[ac++] = p;
	if (ac == 0 || len == 0 || cmd[len - 1] != '\0') {
		cause_set(cause, "empty or truncated command line");
		return -1;
	}
	base = strrchr(av[0], '/') ? strrchr(av[0], '/') + 1 : av[0];
	if (strcmp(base, strrchr(VM_JAIL_QEMU, '/') + 1) != 0) {
		cause_set(cause, "command is %s, not QEMU", av[0]);
		return -1;
	}
	if ((p = arg_after(av, ac, "-name")) == NULL || strcmp(p, name) != 0) {
		cause_set(cause, "QEMU is named \"%s\", not \"%s\"", p ? p : "", name);
		return -1;
	}
	qmp = arg_after(av, ac, "-qmp");
	if (qmp == NULL || strncmp(qmp, "unix:" VM_JAIL_SANDBOX "/qmp.sock,",
	    strlen("unix:" VM_JAIL_SANDBOX "/qmp.sock,")) != 0) {
		cause_set(cause, "QEMU has no QMP socket in its sandbox dir");
		return -1;
	}
	if (parse_unsigned(arg_after(av, ac, "-m"), &vp->vp_memory_mb) == -1 ||
	    parse_unsigned(arg_after(av, ac, "-smp"), &vp->vp_vcpus) == -1) {
		cause_set(cause, "QEMU command line has no valid -m or -smp");
		return -1;
	}
	vp->vp_net = arg_present(av, ac, "-netdev");
	vp->vp_own_mem = 0;
	vp->vp_slots = 0;
	for (i = 1; i + 1 < ac; i++) {
		if (strcmp(av[i], "-device") == 0 &&
		    strncmp(av[i + 1], "virtio-blk-device,drive=slot0,", 30) == 0)
			vp->vp_slots = 1;
		if (strcmp(av[i], "-object") != 0)
			continue;
		obj = av[i + 1];
		if (strncmp(obj, "memory-backend-file,", 20) == 0 &&
		    strstr(obj, ",mem-path=" VM_JAIL_SANDBOX "/mem,") != NULL &&
		    strstr(obj, ",share=on") != NULL)
			vp->vp_own_mem = 1;
	}
	return 0;
}

/* 1 when every uid on the Uid: line (real, effective, saved, fs) is uid. */
static int
status_uid_is(const char *text, uid_t uid)
{
	unsigned long u[4];
	const char *p = strstr(text, "\nUid:");

	if (p == NULL || sscanf(p + 5, "%lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]) != 4)
		return 0;
	return u[0] == uid && u[1] == uid && u[2] == uid && u[3] == uid;
}

/* The processes whose real uid is uid; *n of them, at most one pid kept. */
static int
find_by_uid(uid_t uid, pid_t *pid, char **cause)
{
	struct dirent *de;
	char path[300], *text, *p;
	DIR *d;
	int n = 0;

	if ((d = opendir("/proc")) == NULL) {
		cause_set(cause, "opendir /proc: %s", strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		if (read_file(path, 65536, &text, NULL, NULL) == -1)
			continue;
		/* A zombie is already gone: nothing to adopt. */
		if ((p = strstr(text, "\nUid:")) != NULL &&
		    (uid_t)strtoul(p + 5, NULL, 10) == uid && strstr(text, "\nState:\tZ") == NULL) {
			*pid = (pid_t)atoi(de->d_name);
			n++;
		}
		free(text);
	}
	closedir(d);
	if (n == 0) {
		cause_set(cause, "no process runs as its jail uid %u", (unsigned)uid);
		return -1;
	}
	if (n > 1) {
		cause_set(cause, "%d processes run as its jail uid %u, expected one VMM", n,
		    (unsigned)uid);
		return -1;
	}
	return 0;
}

/* Everything /proc says about pid must match: uid, executable, command line. */
static int
check_proc(pid_t pid, const char *name, uid_t uid, struct vm_proc *vp, char **cause)
{
	struct stat exe, qemu;
	char path[64], *text = NULL;
	size_t len;
	int rc = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_file(path, 65536, &text, NULL, cause) == -1)
		return -1;
	if (!status_uid_is(text, uid)) {
		cause_set(cause, "pid %d does not run as uid %u throughout", (int)pid,
		    (unsigned)uid);
		goto out;
	}
	free(text);
	text = NULL;
	/* The jail binds the host's /usr: the same inode as the host's QEMU. */
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &exe) == -1 || stat(VM_JAIL_QEMU, &qemu) == -1) {
		cause_set(cause, "pid %d: stat executable: %s", (int)pid, strerror(errno));
		goto out;
	}
	if (exe.st_dev != qemu.st_dev || exe.st_ino != qemu.st_ino) {
		cause_set(cause, "pid %d does not run %s", (int)pid, VM_JAIL_QEMU);
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (read_file(path, VM_ADOPT_CMDLINE_MAX, &text, &len, cause) == -1)
		goto out;
	if (vm_proc_check_cmdline(text, len, name, vp, cause) == -1) {
		cause_wrap(cause, "pid %d", (int)pid);
		goto out;
	}
	rc = 0;
out:
	free(text);
	return rc;
}

int
vm_proc_find(const char *name, uid_t uid, struct vm_proc *vp, char **cause)
{
	pid_t pid;
	int pidfd;

	memset(vp, 0, sizeof(*vp));
	vp->vp_pidfd = -1;
	if (find_by_uid(uid, &pid, cause) == -1)
		return -1;
	if ((pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) == -1) {
		cause_set(cause, "pidfd_open %d: %s", (int)pid, strerror(errno));
		return -1;
	}
	if (check_proc(pid, name, uid, vp, cause) == -1) {
		close(pidfd);
		return -1;
	}
	/* Still alive through the pidfd: /proc/PID was this very process. */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == -1) {
		cause_set(cause, "pid %d exited while it was being checked", (int)pid);
		close(pidfd);
		return -1;
	}
	vp->vp_pid = pid;
	vp->vp_pidfd = pidfd;
	return 0;
}
