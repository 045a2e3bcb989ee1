/* Jailed spawn of QEMU: namespaces, private root, cgroups, rlimits, uid drop. */
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/close_range.h>

#include "common/util.h"
#include "vm/vm_jail.h"

#define VM_JAIL_ERR_MAX		512
#define VM_JAIL_FD_HIGH		200	/* scratch fd numbers while renumbering */

/*
 * Child side. Runs between fork and exec in a copy of a single-threaded
 * parent; reports the first failure on errfd and exits. No allocation.
 */
static void __attribute__((noreturn, format(printf, 2, 3)))
jail_fail(int errfd, const char *fmt, ...)
{
	char buf[VM_JAIL_ERR_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && write(errfd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0)
		_exit(126);
	_exit(127);
}

static void
jail_path(char *out, size_t len, int errfd, const char *root, const char *rel)
{
	if ((size_t)snprintf(out, len, "%s%s", root, rel) >= len)
		jail_fail(errfd, "path too long: %s%s", root, rel);
}

/* Create an empty file (or dir) to bind over, then bind src there. */
static void
jail_bind(int errfd, const char *root, const char *src, const char *dst, int dir,
    unsigned long flags)
{
	char target[4096];
	int fd;

	jail_path(target, sizeof(target), errfd, root, dst);
	if (dir) {
		if (mkdir(target, 0755) == -1 && errno != EEXIST)
			jail_fail(errfd, "mkdir %s: %s", target, strerror(errno));
	} else {
		if ((fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) == -1)
			jail_fail(errfd, "create %s: %s", target, strerror(errno));
		close(fd);
	}
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) == -1)
		jail_fail(errfd, "bind %s on %s: %s", src, target, strerror(errno));
	/* Bind flags only apply on a remount of the bind. */
	if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL) == -1)
		jail_fail(errfd, "remount %s: %s", target, strerror(errno));
}

static void
jail_mkdirs(int errfd, const char *root)
{
	static const char *const dirs[] = { "/usr", "/dev", "/proc", "/etc", "/tmp",
	    VM_JAIL_SANDBOX, "/ro" };
	static const char *const links[][2] = { { "usr/lib", "/lib" },
	    { "usr/lib64", "/lib64" }, { "usr/bin", "/bin" } };
	char p[4096];
	size_t i;

	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		jail_path(p, sizeof(p), errfd, root, dirs[i]);
		if (mkdir(p, 0755) == -1 && errno != EEXIST)
			jail_fail(errfd, "mkdir %s: %s", p, strerror(errno));
	}
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		jail_path(p, sizeof(p), errfd, root, links[i][1]);
		if (symlink(links[i][0], p) == -1)
			jail_fail(errfd, "symlink %s: %s", p, strerror(errno));
	}
}

static void
jail_root(const struct vm_jail *j, int errfd)
{
	const unsigned long ro = MS_RDONLY | MS_NOSUID | MS_NODEV;
	char p[4096];
	int i;

	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		jail_fail(errfd, "make mounts private: %s", strerror(errno));
	if (mount("tmpfs", j->root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "size=" VM_JAIL_TMPFS_SIZE ",mode=0755") == -1)
		jail_fail(errfd, "tmpfs on %s: %s", j->root, strerror(errno));
	jail_mkdirs(errfd, j->root);
	jail_bind(errfd, j->root, "/usr", "/usr", 1, ro);
	/* Debian keeps libraries in multiarch dirs that only the cache names. */
	if (access("/etc/ld.so.cache", R_OK) == 0)
		jail_bind(errfd, j->root, "/etc/ld.so.cache", "/etc/ld.so.cache", 0, ro);
	/* Device nodes keep the host devtmpfs mount flags (no nodev). */
	jail_bind(errfd, j->root, "/dev/null", "/dev/null", 0, MS_NOSUID);
	jail_bind(errfd, j->root, "/dev/zero", "/dev/zero", 0, MS_NOSUID);
	jail_bind(errfd, j->root, "/dev/urandom", "/dev/urandom", 0, MS_NOSUID);
	if (j->kvm)
		jail_bind(errfd, j->root, "/dev/kvm", "/dev/kvm", 0, MS_NOSUID);
	jail_bind(errfd, j->root, j->sandbox_dir, VM_JAIL_SANDBOX, 1,
	    MS_NOSUID | MS_NODEV | MS_NOEXEC);
	for (i = 0; i < j->nbinds; i++)
		jail_bind(errfd, j->root, j->binds[i].src, j->binds[i].dst, 0, ro | MS_NOEXEC);
	/* Our own pid namespace's /proc: QEMU sees only itself. */
	jail_path(p, sizeof(p), errfd, j->root, "/proc");
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == -1)
		jail_fail(errfd, "mount proc: %s", strerror(errno));
	if (chdir(j->root) == -1)
		jail_fail(errfd, "chdir %s: %s", j->root, strerror(errno));
	/* pivot_root(".", "."): the old root stacks under the new one; detach it. */
	if (syscall(SYS_pivot_root, ".", ".") == -1)
		jail_fail(errfd, "pivot_root: %s", strerror(errno));
	if (umount2(".", MNT_DETACH) == -1)
		jail_fail(errfd, "detach old root: %s", strerror(errno));
	if (chdir("/") == -1)
		jail_fail(errfd, "chdir /: %s", strerror(errno));
	/* The tmpfs root itself becomes read-only now that it is populated. */
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "size=" VM_JAIL_TMPFS_SIZE) == -1)
		jail_fail(errfd, "remount jail root read-only: %s", strerror(errno));
}

static void
jail_fds(const struct vm_jail *j, int errfd)
{
	int i, fd, high[VM_JAIL_FDS_MAX], devnull;

	/* Move everything out of the way first: targets may overlap sources. */
	for (i = 0; i < j->nfds; i++)
		if ((high[i] = fcntl(j->fds[i], F_DUPFD, VM_JAIL_FD_HIGH)) == -1)
			jail_fail(errfd, "dup fd %d: %s", j->fds[i], strerror(errno));
	if ((fd = fcntl(j->stderr_fd, F_DUPFD, VM_JAIL_FD_HIGH)) == -1)
		jail_fail(errfd, "dup stderr: %s", strerror(errno));
	if ((devnull = open("/dev/null", O_RDONLY)) == -1)
		jail_fail(errfd, "open /dev/null: %s", strerror(errno));
	if (dup2(devnull, 0) == -1 || dup2(fd, 1) == -1 || dup2(fd, 2) == -1)
		jail_fail(errfd, "dup2 stdio: %s", strerror(errno));
	for (i = 0; i < j->nfds; i++)
		if (dup2(high[i], 3 + i) == -1)
			jail_fail(errfd, "dup2 fd %d: %s", 3 + i, strerror(errno));
	/* Everything else closes at exec, including errfd once exec succeeded. */
	if (syscall(SYS_close_range, 3 + j->nfds, ~0U, CLOSE_RANGE_CLOEXEC) == -1)
		jail_fail(errfd, "close_range: %s", strerror(errno));
}

static void
jail_limits(const struct vm_jail *j, int errfd)
{
	const struct { int res; rlim_t val; const char *name; } lims[] = {
		{ RLIMIT_CORE, 0, "core" },
		{ RLIMIT_NOFILE, VM_JAIL_NOFILE, "nofile" },
		{ RLIMIT_NPROC, VM_JAIL_NPROC, "nproc" },
		{ RLIMIT_AS, j->as_bytes ? (rlim_t)j->as_bytes : RLIM_INFINITY, "as" },
		{ RLIMIT_CPU, j->cpu_s ? (rlim_t)j->cpu_s : RLIM_INFINITY, "cpu" },
	};
	struct rlimit rl;
	size_t i;

	for (i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
		rl.rlim_cur = rl.rlim_max = lims[i].val;
		if (lims[i].val == RLIM_INFINITY)
			continue;
		if (setrlimit(lims[i].res, &rl) == -1)
			jail_fail(errfd, "setrlimit %s: %s", lims[i].name, strerror(errno));
	}
}

static void __attribute__((noreturn))
jail_child(const struct vm_jail *j, char *const argv[], int errfd)
{
	static char *const envp[] = { "PATH=/usr/bin", NULL };
	int i, fd;

	for (i = 0; j->cgroup_procs != NULL && j->cgroup_procs[i] != NULL; i++) {
		if ((fd = open(j->cgroup_procs[i], O_WRONLY | O_CLOEXEC)) == -1 ||
		    write(fd, "0", 1) != 1)
			jail_fail(errfd, "join cgroup %s: %s", j->cgroup_procs[i], strerror(errno));
		close(fd);
	}
	if (j->netns_fd != -1) {
		if (setns(j->netns_fd, CLONE_NEWNET) == -1)
			jail_fail(errfd, "enter island netns: %s", strerror(errno));
	} else if (unshare(CLONE_NEWNET) == -1)
		jail_fail(errfd, "unshare net: %s", strerror(errno));
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) == -1)
		jail_fail(errfd, "unshare mount/ipc/uts: %s", strerror(errno));
	if (sethostname("airlock", 7) == -1)
		jail_fail(errfd, "sethostname: %s", strerror(errno));
	jail_root(j, errfd);
	jail_fds(j, errfd);
	jail_limits(j, errfd);
	if (setgroups(0, NULL) == -1)
		jail_fail(errfd, "setgroups: %s", strerror(errno));
	if (setresgid(j->gid, j->gid, j->gid) == -1)
		jail_fail(errfd, "setresgid %u: %s", (unsigned)j->gid, strerror(errno));
	if (setresuid(j->uid, j->uid, j->uid) == -1)
		jail_fail(errfd, "setresuid %u: %s", (unsigned)j->uid, strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		jail_fail(errfd, "no_new_privs: %s", strerror(errno));
	execve(j->exe != NULL ? j->exe : VM_JAIL_QEMU, argv, envp);
	jail_fail(errfd, "exec %s: %s", j->exe != NULL ? j->exe : VM_JAIL_QEMU, strerror(errno));
}

int
vm_jail_spawn(const struct vm_jail *j, char *const argv[], pid_t *pid, char **cause)
{
	char err[VM_JAIL_ERR_MAX];
	int p[2], selfpid, status;
	ssize_t n, got = 0;
	pid_t child;

	if (j->uid == 0 || j->gid == 0) {
		cause_set(cause, "jail: refusing to run %s as uid/gid 0", j->exe != NULL ? j->exe :
		    "QEMU");
		return -1;
	}
	if (j->exe != NULL && strncmp(j->exe, "/usr/", 5) != 0) {
		cause_set(cause, "jail: %s is not under /usr (the only tree the jail has)", j->exe);
		return -1;
	}
	if (j->nfds > VM_JAIL_FDS_MAX || j->nbinds > VM_JAIL_BINDS_MAX) {
		cause_set(cause, "jail: too many fds or binds");
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		cause_set(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	/*
	 * A new pid namespace applies to children only: switch the namespace our
	 * next child is born in, fork (the child is PID 1 there and still our
	 * direct child, so we reap it), and switch straight back.
	 */
	if ((selfpid = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open own pid ns: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (unshare(CLONE_NEWPID) == -1) {
		cause_set(cause, "unshare(CLONE_NEWPID): %s", strerror(errno));
		close(selfpid);
		close(p[0]);
		close(p[1]);
		return -1;
	}
	child = fork();
	if (child == 0) {
		close(p[0]);
		jail_child(j, argv, p[1]);
	}
	if (setns(selfpid, CLONE_NEWPID) == -1)
		abort();	/* every later child would land in this jail's namespace */
	close(selfpid);
	close(p[1]);
	if (child == -1) {
		cause_set(cause, "fork: %s", strerror(errno));
		close(p[0]);
		return -1;
	}
	/* EOF = exec succeeded (the pipe was close-on-exec); bytes = a setup error. */
	while ((n = read(p[0], err + got, sizeof(err) - 1 - (size_t)got)) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			break;
		got += n;
		if ((size_t)got >= sizeof(err) - 1)
			break;
	}
	close(p[0]);
	if (got > 0) {
		err[got] = '\0';
		while (waitpid(child, &status, 0) == -1 && errno == EINTR)
			;
		cause_set(cause, "jail setup: %s", err);
		return -1;
	}
	*pid = child;
	return 0;
}
