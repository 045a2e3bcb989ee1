/*
 * airlock-agent: PID 1 of every sandbox guest, and the far end of the
 * host<->guest channel.
 *
 * As PID 1 it mounts the runtime filesystems, brings up lo, reaps every
 * child (its own processes and inherited orphans), and on SIGTERM/SIGINT/
 * SIGPWR or POST /airlock/poweroff forwards SIGTERM to every process, then
 * SIGKILL, syncs and powers off. Signals are handled in the event loop, so
 * no user command can kill it: the kernel ignores SIGKILL sent to init from
 * inside the guest. On a fatal signal (a crash) it re-executes itself as
 * PID 1 (agent_crash). If it still dies (that exec fails), the kernel
 * panics ("Attempted to kill init") and, with panic=-1, the VM resets: the
 * host sees QEMU exit (no_reboot) and marks the sandbox failed.
 *
 * The channel: the virtio-serial port named org.airlock.agent. While no
 * host is connected, read() on it returns EOF, so the agent probes it on a
 * timer (see port_check) and starts a channel session (chan_mux) when the
 * host appears; the host's HELLO resets
 * all streams, which also covers snapshot restore. A port that goes away
 * (unplugged, driver reset) is closed and found again by name.
 *
 * For tests without a VM, --listen PATH serves the same channel on a unix
 * socket instead (one host connection at a time, a new one replaces the
 * old), and --passwd/--default-user point at a host user.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_console.h"
#include "guest/agent/agent_start.h"
#include "common/log.h"
#include "common/util.h"
#include "http/http_server.h"
#include "link/chan_mux.h"
#include "link/chan_proto.h"

#define AGENT_PORT_NAME		"org.airlock.agent"
#define AGENT_PROBE_MS		20	/* probe period where the fd cannot be waited on */
#define AGENT_SAFETY_MS		1000	/* a probe even while waiting on the fd */
#define AGENT_REOPEN_MIN_MS	10	/* finding the port again: backoff ... */
#define AGENT_REOPEN_MAX_MS	1000	/* ... doubling up to this */
#define AGENT_POWEROFF_GRACE_S	2	/* SIGTERM to SIGKILL on shutdown */

struct agent ag;

static struct chan_mux *chan;
static int chan_fd = -1;		/* virtio port, or the accepted host socket */
static int listen_fd = -1;		/* --listen */
static const char *port_path;		/* --port, else found in sysfs */
static struct event *probe_ev;		/* timer: safety probe, reopen backoff */
static struct event *port_ev;		/* edge-triggered read on the port */
static int probe_logged;
static int reopen_ms;			/* 0: not backing off */
static unsigned long reopens;
static int shutting_down;

void
alog(const char *fmt, ...)
{
	char buf[1024];
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
	if (write(STDERR_FILENO, "airlock-agent: ", 15) < 0 ||
	    write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

static void
agent_say(const char *line)
{
	if (write(STDOUT_FILENO, line, strlen(line)) < 0 || write(STDOUT_FILENO, "\n", 1) < 0)
		return;
}

/* ---- PID 1 ---- */

static void
agent_mount(const char *src, const char *dst, const char *type, unsigned long flags,
    const char *data)
{
	if (mkdir(dst, 0755) == -1 && errno != EEXIST)
		alog("mkdir %s: %s", dst, strerror(errno));
	else if (mount(src, dst, type, flags, data) == -1 && errno != EBUSY)
		alog("mount %s: %s", dst, strerror(errno));
}

static void
agent_write_file(const char *path, const char *value)
{
	int fd;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1 ||
	    write(fd, value, strlen(value)) != (ssize_t)strlen(value))
		alog("write %s: %s", path, strerror(errno));
	if (fd != -1)
		close(fd);
}

/* Forwarded ports connect to 127.0.0.1 in the guest: lo must be up. */
static void
agent_lo_up(void)
{
	struct ifreq ifr;
	int s;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1)
			alog("lo up: %s", strerror(errno));
	}
	close(s);
}

/*
 * The NIC of a networked sandbox (virtio-net, eth0): 10.0.0.2/30, default
 * route via 10.0.0.1, the same in every island (each is alone in its own
 * namespace on the host). Everything the guest sends meets the island's
 * rules and the egress gateway there, whatever it reconfigures here as
 * root. No NIC (network mode none): nothing to do.
 */
static void
agent_net_up(void)
{
	struct ifreq ifr;
	struct rtentry rt;
	struct sockaddr_in *sin;
	int s;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", AGENT_NET_IF);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == -1) {
		close(s);	/* no NIC */
		return;
	}
	agent_write_file("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
	sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, AGENT_NET_ADDR, &sin->sin_addr);
	if (ioctl(s, SIOCSIFADDR, &ifr) == -1)
		alog("%s address: %s", AGENT_NET_IF, strerror(errno));
	inet_pton(AF_INET, "255.255.255.252", &sin->sin_addr);
	if (ioctl(s, SIOCSIFNETMASK, &ifr) == -1)
		alog("%s netmask: %s", AGENT_NET_IF, strerror(errno));
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1)
			alog("%s up: %s", AGENT_NET_IF, strerror(errno));
	}
	memset(&rt, 0, sizeof(rt));
	sin = (struct sockaddr_in *)&rt.rt_dst;
	sin->sin_family = AF_INET;
	sin = (struct sockaddr_in *)&rt.rt_genmask;
	sin->sin_family = AF_INET;
	sin = (struct sockaddr_in *)&rt.rt_gateway;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, AGENT_NET_GATEWAY, &sin->sin_addr);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	if (ioctl(s, SIOCADDRT, &rt) == -1 && errno != EEXIST)
		alog("default route: %s", strerror(errno));
	close(s);
}

static void
agent_pid1_setup(void)
{
	agent_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	agent_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	agent_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "gid=5,mode=620,ptmxmode=666");
	agent_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	if (symlink("/dev/pts/ptmx", "/dev/ptmx") == -1 && errno != EEXIST)
		alog("ptmx: %s", strerror(errno));
	agent_lo_up();
	agent_net_up();
	/* The OOM killer must pick a user command, never init (that would panic). */
	agent_write_file("/proc/self/oom_score_adj", "-1000");
	/* Ctrl-Alt-Del becomes SIGINT to us instead of an instant reboot. */
	reboot(RB_DISABLE_CAD);
}

static void
agent_final_kill(evutil_socket_t fd, short what, void *arg)
{
	kill(-1, SIGKILL);
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);	/* only reached if reboot failed; the kernel panics */
}

void
agent_poweroff(const char *why)
{
	struct timeval tv = { AGENT_POWEROFF_GRACE_S, 0 };

	if (shutting_down)
		return;
	shutting_down = 1;
	alog("shutting down: %s", why);
	proc_shutdown(SIGTERM);
	if (!ag.ag_pid1) {
		event_base_loopexit(ag.ag_base, NULL);
		return;
	}
	kill(-1, SIGTERM);
	event_base_once(ag.ag_base, -1, EV_TIMEOUT, agent_final_kill, NULL, &tv);
}

static char **agent_argv;

/*
 * PID 1 must not die: a crash would panic the kernel and take the sandbox
 * down. On a fatal signal the agent re-executes itself instead (still
 * PID 1): the channel session and the process table are lost (the host
 * reconnects; running commands are orphaned and later reaped), the VM
 * survives. Only async-signal-safe calls here.
 */
static void
agent_crash(int sig)
{
	static const char msg[] = "airlock-agent: fatal signal, re-executing\n";
	sigset_t none;

	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execv("/proc/self/exe", agent_argv);
	execv("/usr/local/bin/airlock-agent", agent_argv);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
agent_crash_handlers(char **argv)
{
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa;
	size_t i;

	agent_argv = argv;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = agent_crash;
	sa.sa_flags = SA_NODEFER | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		sigaction(fatal[i], &sa, NULL);
}

static void
agent_signal(evutil_socket_t sig, short what, void *arg)
{
	switch (sig) {
	case SIGCHLD:
		proc_sigchld();
		break;
	case SIGTERM:
	case SIGINT:
	case SIGPWR:
		agent_poweroff(strsignal((int)sig));
		break;
	default:
		break;
	}
}

/* ---- environment ---- */

static void
agent_load_env(const char *file)
{
	char line[8192], *eq;
	FILE *fp;

	if ((fp = fopen(file, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || (eq = strchr(line, '=')) == NULL || eq == line)
			continue;
		*eq = '\0';
		env_set(&ag.ag_env, &ag.ag_nenv, line, eq + 1);
	}
	fclose(fp);
}

/* ---- the channel ---- */

/* The HTTP server every stream to port 49983 is handed to (agent.h: why these limits). */
static void
agent_http_start(void)
{
	struct http_limits lim;

	log_init("airlock-agent", LOG_LVL_INFO);
	ag.ag_http = http_server_new(ag.ag_base, api_route, NULL);
	http_limits_default(&lim);
	lim.conns_max = AGENT_HTTP_CONNS_MAX;
	lim.head_ms = AGENT_HTTP_HEAD_MS;
	lim.idle_ms = lim.idle_pressure_ms = AGENT_HTTP_IDLE_MS;
	lim.body_grace_ms = lim.body_credit_ms = AGENT_HTTP_BODY_MS;
	lim.body_min_rate = 1;
	lim.write_ms = 0;
	http_server_set_limits(ag.ag_http, &lim);
	http_server_set_error_body(ag.ag_http, api_error_body);
}

/* A stream was opened to port: the API in-process, anything else over lo. */
static int
agent_open(struct chan_mux *mux, uint16_t port, struct chan_target *t, int *code,
    const char **reason, void *arg)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&t->addr;
	int sv[2];

	if (port == CHAN_AGENT_PORT) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == -1) {
			*code = errno;
			*reason = "socketpair failed";
			return -1;
		}
		if (http_server_adopt(ag.ag_http, sv[1], "channel") == -1) {
			close(sv[0]);
			*code = ENOMEM;
			*reason = "cannot start an HTTP connection";
			return -1;
		}
		t->fd = sv[0];
		return 0;
	}
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	t->addrlen = sizeof(*sin);
	return 0;
}

static void probe_arm(int ms);
static void port_check(void);

static void
chan_free_later(evutil_socket_t fd, short what, void *arg)
{
	chan_mux_free(arg);
	/* Only now: libevent refuses an edge-triggered event beside the mux's. */
	if (listen_fd == -1 && chan == NULL) {
		if (port_ev != NULL && event_add(port_ev, NULL) == -1) {
			alog("cannot wait on the port again; probing every %d ms", AGENT_PROBE_MS);
			event_free(port_ev);
			port_ev = NULL;
		}
		port_check();
	}
}

static void
chan_up(struct chan_mux *mux, void *arg)
{
	alog("host connected (channel v%d)", CHAN_VERSION);
}

static void
chan_down(struct chan_mux *mux, const char *reason, void *arg)
{
	alog("host disconnected: %s", reason);
	/* Not from inside the mux's own callback: it is still on the stack. */
	event_base_once(ag.ag_base, -1, EV_TIMEOUT, chan_free_later, mux, NULL);
	chan = NULL;
	if (listen_fd != -1) {
		close(chan_fd);
		chan_fd = -1;
	}
}

static const struct chan_mux_cb chan_cb = {
	.open = agent_open, .up = chan_up, .down = chan_down,
};

/* The virtio port's /dev node: scan sysfs for our name (no udev symlinks). */
static int
agent_find_port(char *out, size_t outlen)
{
	char path[512], name[128];
	struct dirent *de;
	DIR *d;
	FILE *fp;
	int found = 0;

	if ((d = opendir("/sys/class/virtio-ports")) == NULL)
		return -1;
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", de->d_name);
		if ((fp = fopen(path, "re")) == NULL)
			continue;
		if (fgets(name, sizeof(name), fp) != NULL) {
			name[strcspn(name, "\n")] = '\0';
			if (strcmp(name, AGENT_PORT_NAME) == 0) {
				snprintf(out, outlen, "/dev/%.*s", 64, de->d_name);
				found = 1;
			}
		}
		fclose(fp);
	}
	closedir(d);
	return found ? 0 : -1;
}

/*
 * How the agent notices the host (drivers/char/virtio_console.c): while
 * the host's end is closed, read() returns 0 at once and poll() reports
 * POLLIN|POLLHUP, so a level-triggered wait would spin. But the driver
 * wakes the port's waitqueue on every change that matters: the host
 * opening or closing its end (VIRTIO_CONSOLE_PORT_OPEN), data arriving,
 * the port being unplugged. An edge-triggered epoll registration (port_ev)
 * would fire on exactly those wake-ups; it is off for now (port_open says
 * why), so the agent probes every AGENT_PROBE_MS.
 *
 * An unplugged port (device_del, the driver unbound or reset) answers
 * POLLHUP without POLLIN and reads 0 for ever: that fd is dead. It is
 * closed and the port looked for again by name (a re-plugged port is a
 * new /dev/vportNpM), with backoff.
 */
static void
port_lost(const char *why)
{
	alog("channel port lost (%s); reopening", why);
	if (port_ev != NULL) {
		event_free(port_ev);
		port_ev = NULL;
	}
	close(chan_fd);
	chan_fd = -1;
	probe_logged = 0;
	reopen_ms = AGENT_REOPEN_MIN_MS;
	probe_arm(reopen_ms);
}

static int
port_open(void)
{
	char dev[256];

	if (port_path != NULL)
		snprintf(dev, sizeof(dev), "%s", port_path);
	else if (agent_find_port(dev, sizeof(dev)) == -1) {
		if (!probe_logged++)
			alog("waiting for the %s port", AGENT_PORT_NAME);
		return -1;
	}
	if ((chan_fd = open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) == -1) {
		if (!probe_logged++)
			alog("open %s: %s", dev, strerror(errno));
		return -1;
	}
	if (reopens++ == 0)
		alog("channel on %s", dev);
	else
		alog("channel on %s (reopened)", dev);
	reopen_ms = 0;
	probe_logged = 0;
	/*
	 * The edge-triggered wait (port_ev) is off: with it the agent lost its
	 * link for good after re-executing itself (integration/agent_vm
	 * test_pid1, kill -SEGV 1) while the host was mid-session; not yet
	 * understood, so the port is probed every AGENT_PROBE_MS as before.
	 */
	return 0;
}

/*
 * Is a host there? EAGAIN or data: yes, start a session with whatever was
 * read. 0: not yet, wait. Anything else: the port is gone.
 */
static void
port_check(void)
{
	uint8_t buf[CHAN_HDR_LEN + CHAN_MAX_PAYLOAD];
	struct pollfd pfd = { .fd = chan_fd, .events = POLLIN };
	ssize_t n;

	if (chan != NULL)
		return;
	if (chan_fd == -1 && port_open() == -1) {
		reopen_ms = reopen_ms == 0 ? AGENT_REOPEN_MIN_MS : reopen_ms * 2;
		if (reopen_ms > AGENT_REOPEN_MAX_MS)
			reopen_ms = AGENT_REOPEN_MAX_MS;
		probe_arm(reopen_ms);
		return;
	}
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLNVAL | POLLERR |
	    (port_path == NULL ? POLLHUP : 0))) && !(pfd.revents & POLLIN)) {
		port_lost(pfd.revents & POLLHUP ? "hung up for good" : "poll error");
		return;
	}
	n = read(chan_fd, buf, sizeof(buf));
	if (n == 0 || (n == -1 && errno == EINTR)) {
		probe_arm(port_ev != NULL ? AGENT_SAFETY_MS : AGENT_PROBE_MS);
		return;
	}
	if (n == -1 && errno != EAGAIN) {
		port_lost(strerror(errno));
		return;
	}
	if (port_ev != NULL)
		event_del(port_ev);
	evtimer_del(probe_ev);
	if ((chan = chan_mux_new(ag.ag_base, chan_fd, CHAN_ROLE_GUEST, &chan_cb, NULL)) == NULL) {
		if (port_ev != NULL)
			event_add(port_ev, NULL);
		probe_arm(AGENT_PROBE_MS);
		return;
	}
	if (n > 0)
		chan_mux_feed(chan, buf, (size_t)n);
}

static void
probe(evutil_socket_t fd, short what, void *arg)
{
	port_check();
}

static void
probe_arm(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(probe_ev, &tv);
}

static void
agent_accept(evutil_socket_t fd, short what, void *arg)
{
	int s;

	if ((s = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) == -1)
		return;
	/* One host at a time, like the virtio port: a new one takes over. */
	if (chan != NULL) {
		chan_mux_free(chan);
		chan = NULL;
	}
	if (chan_fd != -1)
		close(chan_fd);
	chan_fd = s;
	if ((chan = chan_mux_new(ag.ag_base, s, CHAN_ROLE_GUEST, &chan_cb, NULL)) == NULL) {
		close(s);
		chan_fd = -1;
	}
}

static int
agent_listen(const char *path)
{
	struct sockaddr_un sun;
	int s;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		alog("--listen path too long");
		return -1;
	}
	strcpy(sun.sun_path, path);
	unlink(path);
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1 ||
	    bind(s, (struct sockaddr *)&sun, sizeof(sun)) == -1 || listen(s, 8) == -1) {
		alog("listen %s: %s", path, strerror(errno));
		if (s != -1)
			close(s);
		return -1;
	}
	return s;
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: airlock-agent [--listen SOCKET | --port DEV] [--default-user NAME]\n"
	    "                     [--passwd FILE] [--env-file FILE] [--start-file FILE]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "port", required_argument, NULL, 'p' },
		{ "default-user", required_argument, NULL, 'u' },
		{ "passwd", required_argument, NULL, 'P' },
		{ "env-file", required_argument, NULL, 'e' },
		{ "start-file", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen_path = NULL, *env_file = AGENT_ENV_FILE, *start_file = NULL;
	struct event *ev, *sigs[6];
	static const int signums[] = { SIGCHLD, SIGTERM, SIGINT, SIGPWR, SIGHUP, SIGUSR1 };
	size_t i;
	int c;

	ag.ag_default_user = AGENT_DEFAULT_USER;
	ag.ag_passwd = "/etc/passwd";
	ag.ag_pid1 = getpid() == 1;
	ag.ag_started_ns = monotonic_ns();
	/* As init the kernel hands us its own argv; only parse options we own. */
	while (!ag.ag_pid1 && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_path = optarg;
			break;
		case 'p':
			port_path = optarg;
			break;
		case 'u':
			ag.ag_default_user = optarg;
			break;
		case 'P':
			ag.ag_passwd = optarg;
			break;
		case 'e':
			env_file = optarg;
			break;
		case 's':
			start_file = optarg;
			break;
		default:
			usage();
		}
	}
	if (ag.ag_pid1) {
		agent_pid1_setup();
		agent_crash_handlers(argv);
	}
	signal(SIGPIPE, SIG_IGN);
	agent_load_env(env_file);
	if ((ag.ag_base = event_base_new()) == NULL) {
		alog("event_base_new failed");
		return 1;
	}
	for (i = 0; i < sizeof(signums) / sizeof(signums[0]); i++) {
		sigs[i] = evsignal_new(ag.ag_base, signums[i], agent_signal, NULL);
		evsignal_add(sigs[i], NULL);
	}
	agent_http_start();
	proc_init();
	/* The template's start command (a host-run test agent: only with --start-file). */
	if (ag.ag_pid1 || start_file != NULL)
		start_boot(start_file != NULL ? start_file : AGENT_START_FILE);
	probe_ev = evtimer_new(ag.ag_base, probe, NULL);
	if (listen_path != NULL) {
		if ((listen_fd = agent_listen(listen_path)) == -1)
			return 1;
		ev = event_new(ag.ag_base, listen_fd, EV_READ | EV_PERSIST, agent_accept, NULL);
		event_add(ev, NULL);
	} else
		port_check();
	agent_say(AGENT_READY_LINE);
	for (;;) {
		event_base_dispatch(ag.ag_base);
		if (!ag.ag_pid1)
			break;
		/* PID 1 must never return from main: that would panic the kernel. */
		alog("event loop ended; restarting it");
		sleep(1);
	}
	if (chan != NULL)
		chan_mux_free(chan);
	for (i = 0; i < sizeof(signums) / sizeof(signums[0]); i++)
		event_free(sigs[i]);
	if (listen_path != NULL)
		unlink(listen_path);
	return 0;
}
