/*
 * airlock-init: the initramfs /init. Loads the virtio modules, mounts the
 * root filesystem, switches root and execs the guest agent as PID 1.
 *
 * It runs before anything else in the guest, so every failure is printed
 * on the console with an "airlock-init:" prefix and the VM is powered off:
 * the host sees QEMU exit and reads the reason from the console log.
 * Static binary: it must not depend on anything in the initramfs but itself.
 *
 * Kernel command line knobs (for tests and debugging):
 *   airlock.root=/dev/vda   airlock.rootfstype=ext4   airlock.init=PATH
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define INIT_MODULE_DIR		"/lib/modules"
#define INIT_NEWROOT		"/newroot"
#define INIT_ROOT_WAIT_MS	10000	/* ACPI probing of virtio-mmio is asynchronous */
#define INIT_CMDLINE_MAX	4096

/* Load order from modinfo depends; each name is "<name>.ko" in INIT_MODULE_DIR. */
static const char *const init_modules[] = {
	"virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "failover",
	"net_failover", "virtio_net", "virtio_console", "virtio-rng",
};

static char init_cmdline[INIT_CMDLINE_MAX];

static void
say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, "airlock-init: ", 14) < 0 ||
	    write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

static void __attribute__((noreturn))
die(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	say("FATAL: %s", buf);
	say("powering off");
	sync();
	reboot(RB_POWER_OFF);
	/* reboot() only returns on error; PID 1 exiting panics the kernel, which also ends the VM. */
	_exit(1);
}

/* Value of key=VALUE on the kernel command line, or def. */
static const char *
cmdline_get(const char *key, const char *def)
{
	static char val[256];
	size_t klen = strlen(key);
	const char *p = init_cmdline;

	while (*p != '\0') {
		while (*p == ' ')
			p++;
		if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
			const char *v = p + klen + 1;
			size_t n = strcspn(v, " \n");
			if (n >= sizeof(val))
				die("kernel argument %s is too long", key);
			memcpy(val, v, n);
			val[n] = '\0';
			return val;
		}
		p += strcspn(p, " ");
	}
	return def;
}

static void
mount_or_die(const char *src, const char *dst, const char *type, unsigned long flags)
{
	if (mkdir(dst, 0755) == -1 && errno != EEXIST)
		die("mkdir %s: %s", dst, strerror(errno));
	if (mount(src, dst, type, flags, NULL) == -1 && errno != EBUSY)
		die("mount %s on %s: %s", type, dst, strerror(errno));
}

static void
load_modules(void)
{
	char path[256];
	size_t i;
	int fd;

	for (i = 0; i < sizeof(init_modules) / sizeof(init_modules[0]); i++) {
		snprintf(path, sizeof(path), INIT_MODULE_DIR "/%s.ko", init_modules[i]);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			die("module %s missing (%s): %s", init_modules[i], path, strerror(errno));
		if (syscall(SYS_finit_module, fd, "", 0) == -1 && errno != EEXIST)
			die("loading module %s: %s", init_modules[i], strerror(errno));
		close(fd);
	}
}

static void
wait_for_device(const char *dev)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	struct stat st;
	int waited;

	for (waited = 0; waited < INIT_ROOT_WAIT_MS; waited += 10) {
		if (stat(dev, &st) == 0 && S_ISBLK(st.st_mode))
			return;
		nanosleep(&ts, NULL);
	}
	die("no root device %s after %d ms (is the disk attached?)", dev, INIT_ROOT_WAIT_MS);
}

/* Free the initramfs (it stays in RAM otherwise) before switching root. */
static void
clean_initramfs(void)
{
	static const char *const files[] = { "/init", NULL };
	char path[512];
	struct dirent *de;
	DIR *d;
	size_t i;

	if ((d = opendir(INIT_MODULE_DIR)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), INIT_MODULE_DIR "/%s", de->d_name);
			unlink(path);
		}
		closedir(d);
	}
	for (i = 0; files[i] != NULL; i++)
		unlink(files[i]);
}

static void
switch_root(const char *newroot)
{
	static const char *const moves[] = { "/dev", "/proc", "/sys" };
	char dst[256];
	size_t i;

	for (i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
		snprintf(dst, sizeof(dst), "%s%s", newroot, moves[i]);
		if (mkdir(dst, 0755) == -1 && errno != EEXIST)
			die("mkdir %s: %s", dst, strerror(errno));
		if (mount(moves[i], dst, NULL, MS_MOVE, NULL) == -1)
			die("move %s to %s: %s", moves[i], dst, strerror(errno));
	}
	if (chdir(newroot) == -1)
		die("chdir %s: %s", newroot, strerror(errno));
	clean_initramfs();
	if (mount(".", "/", NULL, MS_MOVE, NULL) == -1)
		die("move root: %s", strerror(errno));
	if (chroot(".") == -1 || chdir("/") == -1)
		die("chroot: %s", strerror(errno));
}

static void
read_cmdline(void)
{
	ssize_t n;
	int fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		die("open /proc/cmdline: %s", strerror(errno));
	n = read(fd, init_cmdline, sizeof(init_cmdline) - 1);
	close(fd);
	if (n < 0)
		die("read /proc/cmdline: %s", strerror(errno));
	init_cmdline[n] = '\0';
}

int
main(void)
{
	const char *root, *fstype, *agent;
	char *const agent_argv[] = { "airlock-agent", NULL };
	int fd;

	if (getpid() != 1)
		die("must run as PID 1 (pid %d)", getpid());
	mount_or_die("devtmpfs", "/dev", "devtmpfs", MS_NOSUID);
	/* The kernel may have had no /dev/console to give us: reopen it now. */
	if ((fd = open("/dev/console", O_RDWR | O_NOCTTY)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	mount_or_die("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_or_die("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	read_cmdline();
	root = strdup(cmdline_get("airlock.root", "/dev/vda"));
	fstype = strdup(cmdline_get("airlock.rootfstype", "ext4"));
	agent = strdup(cmdline_get("airlock.init", "/usr/local/bin/airlock-agent"));
	if (root == NULL || fstype == NULL || agent == NULL)
		die("out of memory");

	load_modules();
	wait_for_device(root);
	if (mkdir(INIT_NEWROOT, 0755) == -1 && errno != EEXIST)
		die("mkdir %s: %s", INIT_NEWROOT, strerror(errno));
	if (mount(root, INIT_NEWROOT, fstype, MS_NOATIME, NULL) == -1)
		die("mount root %s (%s): %s", root, fstype, strerror(errno));
	switch_root(INIT_NEWROOT);
	if (access(agent, X_OK) == -1)
		die("agent %s not executable in the root filesystem: %s", agent, strerror(errno));
	execv(agent, agent_argv);
	die("exec %s: %s", agent, strerror(errno));
}
