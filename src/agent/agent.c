/*
 * airlock-agent, boot-stage version: PID 1 of the guest after switch_root.
 *
 * This is the minimal agent the foundation needs: it does PID 1's duties
 * (mount the runtime filesystems, reap every child, power off on SIGTERM)
 * and announces readiness on the console. The envd-compatible API over the
 * virtio-serial channel (issue "Guest agent") builds on this file.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_console.h"

static void
agent_say(const char *msg)
{
	if (write(STDOUT_FILENO, msg, strlen(msg)) < 0 ||
	    write(STDOUT_FILENO, "\n", 1) < 0)
		return;
}

static void
agent_mount(const char *src, const char *dst, const char *type, unsigned long flags,
    const char *data)
{
	char msg[256];

	if (mkdir(dst, 0755) == -1 && errno != EEXIST) {
		snprintf(msg, sizeof(msg), "airlock-agent: mkdir %s: %s", dst, strerror(errno));
		agent_say(msg);
		return;
	}
	if (mount(src, dst, type, flags, data) == -1 && errno != EBUSY) {
		snprintf(msg, sizeof(msg), "airlock-agent: mount %s: %s", dst, strerror(errno));
		agent_say(msg);
	}
}

static void
agent_poweroff(void)
{
	agent_say("airlock-agent: powering off");
	kill(-1, SIGTERM);
	sleep(1);
	kill(-1, SIGKILL);
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);
}

int
main(void)
{
	sigset_t set;
	int sig;

	agent_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	agent_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	agent_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=620,ptmxmode=666");
	agent_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");

	/* Handle signals synchronously so a stray one cannot kill PID 1. */
	sigfillset(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
	agent_say(AGENT_READY_LINE);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGCHLD) {
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		} else if (sig == SIGTERM || sig == SIGPWR || sig == SIGINT)
			agent_poweroff();
	}
}
