/*
 * QEMU microvm driver behind vm.h: jailed spawn, QMP-driven lifecycle,
 * console capture; restore and snapshot (qemu-notes.md §3c) are in
 * vm_restore.c and vm_snapshot.c, sharing struct vm through vm_priv.h.
 */
#include <sys/socket.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/stor_snapshot.h"
#include "vm/qemu_argv.h"
#include "vm/vm.h"
#include "vm/vm_adopt.h"
#include "vm/vm_priv.h"
#include "vm/vm_console.h"
#include "vm/vm_jail.h"
#include "vm/vm_qmp.h"

static void vm_check_finished(struct vm *);
static void vm_qmp_ready(struct qmp *, const char *, void *);
static void vm_qmp_event(struct qmp *, const char *, json_t *, void *);
static void vm_qmp_closed(struct qmp *, const char *, void *);

const char *
vm_state_name(enum vm_state s)
{
	static const char *const names[] = { "starting", "running", "paused", "stopping",
	    "exited" };

	return s <= VM_EXITED ? names[s] : "?";
}

enum vm_state vm_state(const struct vm *vm) { return vm->vm_state; }
pid_t vm_pid(const struct vm *vm) { return vm->vm_pid; }
const char *vm_name(const struct vm *vm) { return vm->vm_name; }
const char *vm_agent_socket(const struct vm *vm) { return vm->vm_agent_path; }
const struct vm_cgroup *vm_cgroup(const struct vm *vm) { return &vm->vm_cg; }

void
vm_trace(struct vm *vm, const char *fmt, ...)
{
	char *t = vm->vm_times.qmp_trace;
	size_t len = strlen(t), room = sizeof(vm->vm_times.qmp_trace) - len;
	va_list ap;
	int n;

	if (room <= 4 || (len >= 3 && strcmp(t + len - 3, "...") == 0))
		return;
	if (len > 0) {
		t[len++] = ',';
		room--;
	}
	va_start(ap, fmt);
	n = vsnprintf(t + len, room, fmt, ap);
	va_end(ap);
	/* Cut: say so rather than leave half a name. */
	if (n < 0 || (size_t)n >= room)
		snprintf(t + (len > 0 ? len - 1 : 0), 4, "...");
}

void
vm_timings(const struct vm *vm, struct vm_timings *t)
{
	*t = vm->vm_times;
}

void
vm_timer_in(struct vm *vm, int ms, event_callback_fn fn)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (vm->vm_timer != NULL)
		event_free(vm->vm_timer);
	vm->vm_timer = evtimer_new(vm->vm_base, fn, vm);
	evtimer_add(vm->vm_timer, &tv);
}

/* Call the user; returns -1 when vm_free ran meanwhile (touch nothing then). */
static int
vm_emit(struct vm *vm, const struct vm_event *e)
{
	if (vm->vm_evcb == NULL)
		return 0;
	vm_hold(vm);
	vm->vm_evcb(vm, e, vm->vm_arg);
	return vm_put(vm) ? -1 : 0;
}

int
vm_op_done(struct vm *vm, const char *error)
{
	vm_done_cb cb = vm->vm_opcb;
	enum vm_op op = vm->vm_op;

	vm->vm_op = VM_OP_NONE;
	vm->vm_opcb = NULL;
	if (vm->vm_timer != NULL) {
		event_free(vm->vm_timer);
		vm->vm_timer = NULL;
	}
	if (cb == NULL || op == VM_OP_NONE)
		return 0;
	vm_hold(vm);
	cb(vm, error, vm->vm_arg);
	return vm_put(vm) ? -1 : 0;
}

/* Fail the current operation; a VMM that never got going is killed. */
void
vm_op_fail(struct vm *vm, const char *fmt, ...)
{
	va_list ap;
	char *msg, *qlog;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	if (vm->vm_op == VM_OP_BOOT || vm->vm_op == VM_OP_RESTORE || vm->vm_op == VM_OP_ADOPT ||
	    vm->vm_op == VM_OP_SPAWN) {
		/* Nothing half-started (or half-adopted): the VMM goes, the caller sees why. */
		qlog = NULL;
		if (vm->vm_sb != NULL && read_file(vm->vm_sb->ss_qemulog, 4096, &qlog, NULL,
		    NULL) == 0 && *qlog != '\0') {
			char *m2;
			xasprintf(&m2, "%s; qemu: %s", msg, qlog);
			free(msg);
			msg = m2;
		}
		free(qlog);
		vm->vm_flags |= VM_F_WANT_EXIT;
		if (vm->vm_pidfd != -1)
			syscall(SYS_pidfd_send_signal, vm->vm_pidfd, SIGKILL, NULL, 0);
	}
	vm_op_done(vm, msg);
	free(msg);
}

/* --- console --------------------------------------------------------- */

static void
vm_console_line(const char *line, size_t len, void *arg)
{
	struct vm *vm = arg;
	struct vm_event e;

	memset(&e, 0, sizeof(e));
	e.type = VM_EVENT_CONSOLE;
	e.line = line;
	e.line_len = len;
	vm_emit(vm, &e);	/* vm_free inside frees the console, which notices */
}

int
vm_check_peer(const struct vm *vm, int fd, char **cause)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == -1) {
		cause_set(cause, "SO_PEERCRED: %s", strerror(errno));
		return -1;
	}
	if (cr.uid != vm->vm_sb->ss_uid) {
		cause_set(cause, "vm %s: socket served by uid %ld, not the sandbox's %ld",
		    vm->vm_name, (long)cr.uid, (long)vm->vm_sb->ss_uid);
		return -1;
	}
	return 0;
}

int
vm_agent_connect(const struct vm *vm, char **cause)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", vm->vm_agent_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		cause_set(cause, "agent socket %s: %s", vm->vm_agent_path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (vm_check_peer(vm, fd, cause) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
vm_console_connect(struct vm *vm, char **cause)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", vm->vm_console_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		cause_set(cause, "console %s: %s", vm->vm_console_path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (vm_check_peer(vm, fd, cause) == -1) {
		close(fd);
		return -1;
	}
	/* Without line events a flood of short lines costs a copy per chunk, nothing per line. */
	vm->vm_con = vm_console_new(vm->vm_base, fd, vm->vm_sb->ss_console, vm->vm_console_max,
	    vm->vm_console_events ? vm_console_line : NULL, vm);
	return 0;
}

/* --- process exit ---------------------------------------------------- */

static void
vm_pid_exited(evutil_socket_t fd, short ev, void *arg)
{
	struct vm *vm = arg;
	int status = 0;

	/* An adopted VMM is not our child: the pidfd only says it exited. */
	if (!(vm->vm_flags & VM_F_ADOPTED) &&
	    waitpid(vm->vm_pid, &status, WNOHANG) != vm->vm_pid)
		return;
	vm->vm_status = status;
	vm->vm_flags |= VM_F_DEAD;
	event_del(vm->vm_pidev);
	vm_check_finished(vm);
}

static char *
vm_exit_reason(struct vm *vm)
{
	int st = vm->vm_status;
	char *r;

	if ((vm->vm_flags & VM_F_ADOPTED) && vm_cgroup_oom_kills(&vm->vm_cg) > 0)
		xasprintf(&r, "VMM killed by the kernel OOM killer (cgroup memory limit)");
	else if (vm->vm_flags & VM_F_ADOPTED)
		xasprintf(&r, "VMM exited (status unknown: adopted after an airlockd restart)%s%s%s",
		    vm->vm_guest_stop ? " (" : "", vm->vm_guest_stop ? vm->vm_guest_stop : "",
		    vm->vm_guest_stop ? ")" : "");
	else if (WIFEXITED(st))
		xasprintf(&r, "VMM exited with status %d%s%s%s", WEXITSTATUS(st),
		    vm->vm_guest_stop ? " (" : "", vm->vm_guest_stop ? vm->vm_guest_stop : "",
		    vm->vm_guest_stop ? ")" : "");
	else if (WTERMSIG(st) == SIGKILL && vm_cgroup_oom_kills(&vm->vm_cg) > 0)
		xasprintf(&r, "VMM killed by the kernel OOM killer (cgroup memory limit)");
	else
		xasprintf(&r, "VMM killed by signal %d", WTERMSIG(st));
	return r;
}

/* Both halves gone: release everything, then tell the owner (job.c model). */
static void
vm_check_finished(struct vm *vm)
{
	struct vm_event e;
	char *reason, *tail;
	int expected;

	if ((vm->vm_flags & (VM_F_DEAD | VM_F_CLOSED)) != (VM_F_DEAD | VM_F_CLOSED) ||
	    vm->vm_state == VM_EXITED)
		return;
	expected = (vm->vm_flags & VM_F_WANT_EXIT) != 0;
	/* Drain what the console still holds so the tail is complete. */
	tail = NULL;
	if (vm->vm_con != NULL) {
		if (vm_console_drain(vm->vm_con) == -1)
			return;		/* a console callback ended vm (and the console) */
		tail = vm_console_tail(vm->vm_con);
		vm_console_free(vm->vm_con);
		vm->vm_con = NULL;
	}
	if (tail == NULL)
		tail = xstrdup("");
	reason = vm_exit_reason(vm);
	free(vm->vm_exit_why);
	vm->vm_exit_why = xstrdup(reason);
	if (vm_cgroup_destroy(&vm->vm_cg, NULL) == -1)
		log_warnx("vm %s: cgroup not removed", vm->vm_name);
	if (vm->vm_pidfd != -1) {
		event_free(vm->vm_pidev);
		vm->vm_pidev = NULL;
		close(vm->vm_pidfd);
		vm->vm_pidfd = -1;
	}
	if (vm->vm_qmp != NULL) {
		qmp_free(vm->vm_qmp);
		vm->vm_qmp = NULL;
	}
	vm->vm_state = VM_EXITED;
	if (vm->vm_op == VM_OP_STOP) {
		if (vm_op_done(vm, NULL) == -1)
			goto out;
	} else if (vm->vm_op != VM_OP_NONE) {
		char *msg, *qlog = NULL;

		/* QEMU says why it refused (e.g. "load of migration failed"). */
		if (read_file(vm->vm_sb->ss_qemulog, 4096, &qlog, NULL, NULL) == -1)
			qlog = xstrdup("");
		xasprintf(&msg, "%s%s%s%s%s; console tail:\n%s", reason,
		    vm->vm_qmp_err ? "; QMP: " : "", vm->vm_qmp_err ? vm->vm_qmp_err : "",
		    *qlog ? "; qemu: " : "", qlog, tail);
		free(qlog);
		if (vm_op_done(vm, msg) == -1) {
			free(msg);
			goto out;
		}
		free(msg);
	}
	memset(&e, 0, sizeof(e));
	e.type = VM_EVENT_EXITED;
	e.reason = reason;
	e.expected = expected;
	e.console_tail = tail;
	vm_emit(vm, &e);
out:
	free(reason);
	free(tail);
}

/* --- spawn ----------------------------------------------------------- */

struct vm *
vm_new(struct event_base *base, const struct vm_config *cfg, vm_event_cb ev,
    vm_done_cb done, void *arg)
{
	struct vm *vm = xcalloc(1, sizeof(*vm));
	const struct stor_sandbox *sb = cfg->sandbox;

	ref_init(&vm->vm_ref);
	vm->vm_base = base;
	vm->vm_name = xstrdup(cfg->name);
	vm->vm_template = xstrdup(cfg->template_name ? cfg->template_name : "");
	vm->vm_kernel_id = xstrdup(cfg->kernel_id ? cfg->kernel_id : "");
	vm->vm_memory_mb = cfg->memory_mb;
	vm->vm_vcpus = cfg->vcpus;
	vm->vm_sb = sb;
	xasprintf(&vm->vm_qmp_path, "%s/qmp.sock", sb->ss_vmdir);
	xasprintf(&vm->vm_console_path, "%s/console.sock", sb->ss_vmdir);
	xasprintf(&vm->vm_agent_path, "%s/agent.sock", sb->ss_vmdir);
	vm->vm_state = VM_STARTING;
	vm->vm_pid = -1;
	vm->vm_pidfd = -1;
	vm->vm_console_max = cfg->console_max ? cfg->console_max : VM_CONSOLE_MAX;
	vm->vm_console_events = cfg->console_events;
	vm->vm_snapfd = -1;
	vm->vm_devfd = -1;
	vm->vm_evcb = ev;
	vm->vm_opcb = done;
	vm->vm_arg = arg;
	return vm;
}

void
vm_spec_common(const struct vm_config *cfg, struct vm_spec *s)
{
	unsigned i;

	memset(s, 0, sizeof(*s));
	s->accel = cfg->accel;
	s->tsc_khz = cfg->tsc_khz;
	s->vcpus = cfg->vcpus;
	s->memory_mb = cfg->memory_mb;
	s->rootfs = VM_JAIL_SANDBOX "/rootfs.ext4";
	s->console_socket = VM_JAIL_SANDBOX "/console.sock";
	s->qmp_socket = VM_JAIL_SANDBOX "/qmp.sock";
	s->agent_socket = VM_JAIL_SANDBOX "/agent.sock";
	s->name = cfg->name;
	s->no_reboot = 1;
	s->seccomp = 1;
	s->net = cfg->tap_fd != -1;
	s->guest_mac = "52:54:00:0a:00:02";
	s->tcg_tb_mb = VM_TCG_TB_MB;
	s->nvolumes = cfg->nvolumes <= VM_VOLUMES_MAX ? cfg->nvolumes : VM_VOLUMES_MAX + 1;
	/* Serials first: the device list a restore checks is made before any fd. */
	for (i = 0; i < cfg->nvolumes && i < VM_VOLUMES_MAX; i++) {
		s->volumes[i].serial = cfg->volumes[i].serial;
		s->volumes[i].read_only = cfg->volumes[i].read_only;
		s->volumes[i].slot = cfg->slots ? cfg->volumes[i].slot : -1;
	}
	s->slots = cfg->slots;
}

/*
 * Append the volumes' fds after fds[0..*nfds) and point the spec's entries
 * at their numbers in QEMU (fds are renumbered from 3 by vm_spawn).
 */
void
vm_spec_volumes(const struct vm_config *cfg, struct vm_spec *s, int *fds, int *nfds)
{
	unsigned i;

	for (i = 0; i < cfg->nvolumes && i < VM_VOLUMES_MAX; i++) {
		fds[*nfds] = cfg->volumes[i].fd;
		s->volumes[i].fd = 3 + *nfds;
		(*nfds)++;
		if (!cfg->volumes[i].read_only) {
			fds[*nfds] = cfg->volumes[i].fd_ro;
			s->volumes[i].fd_ro = 3 + *nfds;
			(*nfds)++;
		}
	}
}

/*
 * Spawn the jailed VMM for spec with fds (renumbered from 3) and connect
 * QMP. On failure nothing is running and the cgroup is gone.
 */
int
vm_spawn(struct vm *vm, const struct vm_config *cfg, struct vm_spec *spec,
    int *fds, int nfds, struct vm_jail_bind *binds, int nbinds, char **cause)
{
	struct qmp_callbacks qcb = { vm_qmp_ready, vm_qmp_event, vm_qmp_closed, vm };
	struct vm_limits lim = cfg->limits;
	struct vm_jail j;
	struct argv a;
	int errfd, i, rc;

	if (lim.memory_bytes == 0)
		lim.memory_bytes = ((uint64_t)cfg->memory_mb << 20) + VM_MEM_OVERHEAD;
	if (lim.pids_max == 0)
		lim.pids_max = 512;
	if (lim.cpu_millis == 0)
		lim.cpu_millis = cfg->vcpus * 1000;
	/* Checked before j.fds is filled: vm_jail_spawn's own check would come too late. */
	if (nfds < 0 || nfds > VM_JAIL_FDS_MAX) {
		cause_set(cause, "%d fds for the VMM, at most %d", nfds, VM_JAIL_FDS_MAX);
		return -1;
	}
	if (qemu_argv_build(spec, &a, cause) == -1)
		return -1;
	qemu_argv_devices(spec, vm->vm_devices, sizeof(vm->vm_devices));
	if (vm_cgroup_create(cfg->cgroup_root, cfg->name, &lim, &vm->vm_cg, cause) == -1) {
		argv_free(&a);
		return -1;
	}
	/* Stale sockets from an earlier VMM of this sandbox would confuse connect. */
	unlink(vm->vm_qmp_path);
	unlink(vm->vm_console_path);
	unlink(vm->vm_agent_path);
	if ((errfd = open(vm->vm_sb->ss_qemulog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1) {
		cause_set(cause, "open %s: %s", vm->vm_sb->ss_qemulog, strerror(errno));
		goto bad;
	}
	memset(&j, 0, sizeof(j));
	j.root = vm->vm_sb->ss_jaildir;
	j.sandbox_dir = vm->vm_sb->ss_vmdir;
	j.uid = vm->vm_sb->ss_uid;
	j.gid = vm->vm_sb->ss_gid;
	j.netns_fd = cfg->netns_fd;
	j.kvm = cfg->accel == VM_ACCEL_KVM;
	for (i = 0; i < nbinds; i++)
		j.binds[j.nbinds++] = binds[i];
	for (i = 0; i < nfds; i++)
		j.fds[j.nfds++] = fds[i];
	j.stderr_fd = errfd;
	j.cgroup_procs = vm->vm_cg.vc_procs;
	rc = vm_jail_spawn(&j, a.av, &vm->vm_pid, cause);
	vm->vm_times.spawned = monotonic_ms_since(vm->vm_t0);
	close(errfd);
	if (rc == -1)
		goto bad;
	argv_free(&a);
	if ((vm->vm_pidfd = (int)syscall(SYS_pidfd_open, vm->vm_pid, 0)) == -1) {
		cause_set(cause, "pidfd_open: %s", strerror(errno));
		kill(vm->vm_pid, SIGKILL);
		waitpid(vm->vm_pid, NULL, 0);
		vm->vm_pid = -1;
		vm_cgroup_destroy(&vm->vm_cg, NULL);
		return -1;
	}
	vm->vm_pidev = event_new(vm->vm_base, vm->vm_pidfd, EV_READ | EV_PERSIST,
	    vm_pid_exited, vm);
	event_add(vm->vm_pidev, NULL);
	vm->vm_qmp = qmp_connect(vm->vm_base, vm->vm_qmp_path, VM_QMP_TIMEOUT_MS, &qcb, cause);
	qmp_expect_peer_uid(vm->vm_qmp, vm->vm_sb->ss_uid);
	return 0;
bad:
	argv_free(&a);
	vm_cgroup_destroy(&vm->vm_cg, NULL);
	return -1;
}

/* --- QMP plumbing ---------------------------------------------------- */

int
vm_cmd(struct vm *vm, const char *cmd, json_t *args, qmp_reply_cb cb)
{
	char *cause = NULL;

	/* Which transport a stream used is part of what the trace is for. */
	if (strncmp(cmd, "migrate", 7) == 0 && json_is_string(json_object_get(args, "uri")))
		vm_trace(vm, "%s(%s)", cmd, json_string_value(json_object_get(args, "uri")));
	else
		vm_trace(vm, "%s", cmd);
	if (vm->vm_qmp == NULL || qmp_command(vm->vm_qmp, cmd, args, VM_CMD_TIMEOUT_MS, cb, vm,
	    &cause) == -1) {
		vm_op_fail(vm, "%s", cause ? cause : "QMP not connected");
		free(cause);
		return -1;
	}
	return 0;
}

/*
 * QEMU reports every failed request; say it once a minute. With
 * werror=enospc a host out of space has stopped the guest (qemu_argv.c).
 */
static void
vm_io_error(struct vm *vm, json_t *data)
{
	uint64_t now = monotonic_ms();
	const char *action = json_string_value(json_object_get(data, "action"));
	const char *reason = json_string_value(json_object_get(data, "reason"));

	/* Per VM: one guest's flood must not hide another's. */
	if (vm->vm_io_err_ms != 0 && now - vm->vm_io_err_ms < 60000)
		return;
	vm->vm_io_err_ms = now;
	if (json_is_true(json_object_get(data, "nospace")))
		log_warnx("vm %s: the host filesystem under its disk is full: QEMU %s the guest "
		    "until space is freed", vm->vm_name, action && strcmp(action, "stop") == 0 ?
		    "stopped" : "reported it to");
	else
		log_warnx("vm %s: disk I/O error (%s), %s", vm->vm_name, reason ? reason : "?",
		    action ? action : "?");
}

static void
vm_qmp_event(struct qmp *q, const char *event, json_t *data, void *arg)
{
	struct vm *vm = arg;
	struct vm_event e;
	json_t *r;

	if (strcmp(event, "BLOCK_IO_ERROR") == 0) {
		vm_io_error(vm, data);
		return;
	}
	/* The events capability: the end of a device state stream, no polling. */
	if (strcmp(event, "MIGRATION") == 0) {
		const char *st = json_string_value(json_object_get(data, "status"));

		vm_trace(vm, "MIGRATION:%s", st ? st : "?");
		if (vm->vm_op == VM_OP_RESTORE)
			vm_incoming_migration(vm, st);
		else if (vm->vm_op == VM_OP_SNAPSHOT)
			vm_snap_migration(vm, st);
		return;
	}
	/* Only with a pvpanic device; without one a panic is a guest-reset SHUTDOWN. */
	if (strcmp(event, "GUEST_PANICKED") == 0)
		r = json_string("guest-panicked");
	else if (strcmp(event, "SHUTDOWN") == 0)
		r = json_incref(json_object_get(data, "reason"));
	else
		return;
	free(vm->vm_guest_stop);
	vm->vm_guest_stop = xstrdup(json_is_string(r) ? json_string_value(r) : "shutdown");
	json_decref(r);
	/* host-qmp-quit is ours; everything else came from the guest. */
	if (strncmp(vm->vm_guest_stop, "host-", 5) == 0)
		return;
	memset(&e, 0, sizeof(e));
	e.type = VM_EVENT_GUEST_STOPPED;
	e.reason = vm->vm_guest_stop;
	vm_emit(vm, &e);
}

static void
vm_status_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;
	vm_status_cb cb = vm->vm_status_cb;
	const char *st = json_string_value(json_object_get(ret, "status"));

	vm->vm_status_cb = NULL;
	if (cb == NULL)
		return;
	if (error == NULL && st == NULL)
		error = "query-status: no status in the answer";
	vm_hold(vm);
	cb(vm, error == NULL ? st : NULL, error, vm->vm_status_arg);
	vm_put(vm);
}

int
vm_query_status(struct vm *vm, int timeout_ms, vm_status_cb cb, void *arg, char **cause)
{
	if (vm->vm_status_cb != NULL) {
		cause_set(cause, "vm %s: a status query is already in flight", vm->vm_name);
		return -1;
	}
	if (vm->vm_qmp == NULL || qmp_command(vm->vm_qmp, "query-status", NULL, timeout_ms,
	    vm_status_reply, vm, cause) == -1) {
		if (vm->vm_qmp == NULL)
			cause_set(cause, "vm %s: QMP not connected", vm->vm_name);
		return -1;
	}
	vm->vm_status_cb = cb;
	vm->vm_status_arg = arg;
	return 0;
}

static void
vm_qmp_closed(struct qmp *q, const char *reason, void *arg)
{
	struct vm *vm = arg;

	vm->vm_flags |= VM_F_CLOSED;
	vm_check_finished(vm);
}

static void vm_boot_cont(struct qmp *, json_t *, const char *, void *);
static void vm_adopt_status(struct qmp *, json_t *, const char *, void *);

static void
vm_qmp_ready(struct qmp *q, const char *error, void *arg)
{
	struct vm *vm = arg;
	char *cause = NULL;

	if (error != NULL) {
		/*
		 * Usually the VMM died (bad argument, OOM kill): its exit status
		 * says more than the socket error, so the operation completes on
		 * the exit path with both. A live VMM that never answered is killed.
		 */
		vm->vm_flags |= VM_F_CLOSED;
		free(vm->vm_qmp_err);
		vm->vm_qmp_err = xstrdup(error);
		if (vm->vm_pidfd != -1 && !(vm->vm_flags & VM_F_DEAD))
			syscall(SYS_pidfd_send_signal, vm->vm_pidfd, SIGKILL, NULL, 0);
		vm_check_finished(vm);
		return;
	}
	vm->vm_times.qmp_ready = monotonic_ms_since(vm->vm_t0);
	/* The console socket exists once QMP answers: chardevs come first. */
	if (vm_console_connect(vm, &cause) == -1) {
		vm_op_fail(vm, "%s", cause);
		free(cause);
		return;
	}
	if (vm->vm_op == VM_OP_BOOT) {
		vm_cmd(vm, "cont", NULL, vm_boot_cont);
		return;
	}
	if (vm->vm_op == VM_OP_ADOPT) {
		vm_cmd(vm, "query-status", NULL, vm_adopt_status);
		return;
	}
	vm_incoming_qmp_ready(vm);
}

/* --- boot ------------------------------------------------------------ */

static void
vm_boot_cont(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_BOOT)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "cont: %s", error);
		return;
	}
	vm->vm_state = VM_RUNNING;
	vm->vm_times.running = monotonic_ms_since(vm->vm_t0);
	vm_op_done(vm, NULL);
}

struct vm *
vm_boot(struct event_base *base, const struct vm_config *cfg, vm_event_cb ev,
    vm_done_cb done, void *arg, char **cause)
{
	struct vm_jail_bind binds[2] = { { cfg->kernel, "/ro/vmlinux" },
	    { cfg->initrd, "/ro/initrd" } };
	struct vm_spec spec;
	struct vm *vm;
	double t0;
	int fds[1 + 2 * VM_VOLUMES_MAX], nfds = 0, fd;

	t0 = monotonic_msf();
	if (cfg->kernel == NULL || cfg->initrd == NULL) {
		cause_set(cause, "boot %s: kernel and initrd are required", cfg->name);
		return NULL;
	}
	/* Sparse RAM file of the full size, owned by the jail uid. */
	if ((fd = open(cfg->sandbox->ss_mem, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600)) == -1 || ftruncate(fd, (off_t)cfg->memory_mb << 20) == -1) {
		cause_set(cause, "boot %s: memory file %s: %s", cfg->name, cfg->sandbox->ss_mem,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return NULL;
	}
	close(fd);
	if (stor_give(cfg->sandbox, cfg->sandbox->ss_mem, 0600, cause) == -1)
		return NULL;
	vm = vm_new(base, cfg, ev, done, arg);
	vm->vm_t0 = t0;
	vm->vm_op = VM_OP_BOOT;
	vm->vm_own_mem = 1;
	vm_spec_common(cfg, &spec);
	spec.kernel = "/ro/vmlinux";
	spec.initrd = "/ro/initrd";
	spec.append = cfg->append;
	spec.mem_path = VM_JAIL_SANDBOX "/mem";
	spec.mem_share = 1;
	spec.start_paused = 1;
	if (cfg->tap_fd != -1) {
		fds[nfds++] = cfg->tap_fd;
		spec.tap_fd = 3;
	}
	vm_spec_volumes(cfg, &spec, fds, &nfds);
	if (vm_spawn(vm, cfg, &spec, fds, nfds, binds, 2, cause) == -1) {
		cause_wrap(cause, "boot %s", cfg->name);
		vm->vm_op = VM_OP_NONE;
		vm_free(vm);
		return NULL;
	}
	return vm;
}

/* --- adopt ----------------------------------------------------------- */

static void
vm_adopt_status(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;
	const char *st;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_ADOPT)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "query-status: %s", error);
		return;
	}
	st = json_string_value(json_object_get(ret, "status"));
	if (st != NULL && strcmp(st, "running") == 0)
		vm->vm_state = VM_RUNNING;
	else if (st != NULL && strcmp(st, "paused") == 0)
		vm->vm_state = VM_PAUSED;
	else {
		/* E.g. postmigrate: a snapshot the previous daemon never finished. */
		vm_op_fail(vm, "adopt: the VM is %s, not running or paused", st ? st : "?");
		return;
	}
	vm->vm_times.running = monotonic_ms_since(vm->vm_t0);
	vm_op_done(vm, NULL);
}

int
vm_adopt_slots(const struct vm_config *cfg, char **cause)
{
	struct vm_proc vp;

	if (vm_proc_find(cfg->name, cfg->sandbox->ss_uid, &vp, cause) == -1)
		return -1;
	close(vp.vp_pidfd);
	return vp.vp_slots;
}

struct vm *
vm_adopt(struct event_base *base, const struct vm_config *cfg, vm_event_cb ev,
    vm_done_cb done, void *arg, char **cause)
{
	struct qmp_callbacks qcb = { vm_qmp_ready, vm_qmp_event, vm_qmp_closed, NULL };
	struct vm_cgroup cg;
	struct vm_proc vp;
	struct vm_spec spec;
	struct vm *vm;
	double t0;

	t0 = monotonic_msf();
	if (vm_proc_find(cfg->name, cfg->sandbox->ss_uid, &vp, cause) == -1)
		goto bad;
	if (vp.vp_memory_mb != cfg->memory_mb || vp.vp_vcpus != cfg->vcpus ||
	    !vp.vp_slots != !cfg->slots) {
		cause_set(cause, "VMM pid %d has %u MiB / %u vCPUs%s, the sandbox %u MiB / %u "
		    "vCPUs%s", (int)vp.vp_pid, vp.vp_memory_mb, vp.vp_vcpus,
		    vp.vp_slots ? " / volume slots" : "", cfg->memory_mb, cfg->vcpus,
		    cfg->slots ? " / volume slots" : "");
		close(vp.vp_pidfd);
		goto bad;
	}
	if (vm_cgroup_open(cfg->cgroup_root, cfg->name, vp.vp_pid, &cg, cause) == -1) {
		close(vp.vp_pidfd);
		goto bad;
	}
	/*
	 * From here on the VM owns the pidfd and cgroup: vm_free releases them.
	 * The console is appended to once QMP is up; what the guest printed
	 * while nobody listened is lost (QEMU drops it).
	 */
	vm = vm_new(base, cfg, ev, done, arg);
	vm->vm_t0 = t0;
	vm->vm_op = VM_OP_ADOPT;
	vm->vm_flags |= VM_F_ADOPTED;
	vm->vm_own_mem = vp.vp_own_mem;
	vm->vm_pid = vp.vp_pid;
	vm->vm_pidfd = vp.vp_pidfd;
	vm->vm_cg = cg;
	/* The snapshot header's device list, as vm_spawn derives it at boot. */
	vm_spec_common(cfg, &spec);
	spec.net = vp.vp_net;
	qemu_argv_devices(&spec, vm->vm_devices, sizeof(vm->vm_devices));
	vm->vm_pidev = event_new(vm->vm_base, vm->vm_pidfd, EV_READ | EV_PERSIST,
	    vm_pid_exited, vm);
	event_add(vm->vm_pidev, NULL);
	qcb.arg = vm;
	vm->vm_qmp = qmp_connect(vm->vm_base, vm->vm_qmp_path, VM_QMP_TIMEOUT_MS, &qcb, cause);
	qmp_expect_peer_uid(vm->vm_qmp, vm->vm_sb->ss_uid);
	return vm;
bad:
	cause_wrap(cause, "adopt %s", cfg->name);
	return NULL;
}

/* --- pause / resume -------------------------------------------------- */

static void
vm_pause_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_PAUSE)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "stop: %s", error);
		return;
	}
	vm->vm_state = VM_PAUSED;
	vm_op_done(vm, NULL);
}

void
vm_resume_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_RESUME)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "cont: %s", error);
		return;
	}
	vm->vm_state = VM_RUNNING;
	vm_op_done(vm, NULL);
}

int
vm_op_start(struct vm *vm, enum vm_op op, vm_done_cb done, enum vm_state need1,
    enum vm_state need2, char **cause)
{
	if (vm->vm_op != VM_OP_NONE) {
		cause_set(cause, "vm %s: busy", vm->vm_name);
		return -1;
	}
	if (vm->vm_state != need1 && vm->vm_state != need2) {
		cause_set(cause, "vm %s: is %s", vm->vm_name, vm_state_name(vm->vm_state));
		return -1;
	}
	vm->vm_op = op;
	vm->vm_opcb = done;
	return 0;
}

int
vm_pause(struct vm *vm, vm_done_cb done, char **cause)
{
	if (vm_op_start(vm, VM_OP_PAUSE, done, VM_RUNNING, VM_RUNNING, cause) == -1)
		return -1;
	vm_cmd(vm, "stop", NULL, vm_pause_reply);
	return 0;
}

int
vm_resume(struct vm *vm, vm_done_cb done, char **cause)
{
	if (vm_op_start(vm, VM_OP_RESUME, done, VM_PAUSED, VM_PAUSED, cause) == -1)
		return -1;
	vm_cmd(vm, "cont", NULL, vm_resume_reply);
	return 0;
}

/* --- stop ------------------------------------------------------------ */

static void
vm_kill_timer(evutil_socket_t fd, short ev, void *arg)
{
	struct vm *vm = arg;

	if (vm->vm_pidfd != -1 && !(vm->vm_flags & VM_F_DEAD))
		syscall(SYS_pidfd_send_signal, vm->vm_pidfd, SIGKILL, NULL, 0);
}

static void
vm_quit_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	/* The exit itself completes the stop (vm_check_finished). */
}

void
vm_stop_quit(struct vm *vm)
{
	vm->vm_state = VM_STOPPING;
	vm->vm_flags |= VM_F_WANT_EXIT;
	if (vm->vm_qmp == NULL || !qmp_is_ready(vm->vm_qmp) ||
	    qmp_command(vm->vm_qmp, "quit", NULL, VM_CMD_TIMEOUT_MS, vm_quit_reply, vm,
	    NULL) == -1) {
		vm_kill_timer(-1, 0, vm);
		return;
	}
	vm_timer_in(vm, VM_QUIT_TIMEOUT_MS, vm_kill_timer);
}

static void
vm_grace_timer(evutil_socket_t fd, short ev, void *arg)
{
	vm_stop_quit(arg);
}

static void
vm_powerdown_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
}

int
vm_stop(struct vm *vm, int grace_ms, vm_done_cb done, char **cause)
{
	if (vm->vm_state == VM_EXITED) {
		cause_set(cause, "vm %s: already exited", vm->vm_name);
		return -1;
	}
	if (vm->vm_op != VM_OP_NONE && vm->vm_op != VM_OP_STOP) {
		/* Stop wins over whatever runs: fail it first, drop a partial snapshot. */
		if (vm->vm_op == VM_OP_SNAPSHOT) {
			if (vm->vm_snapfd != -1) {
				close(vm->vm_snapfd);
				vm->vm_snapfd = -1;
			}
			stor_snapshot_abort(&vm->vm_snap);
			stor_snapshot_free(&vm->vm_snap);
		}
		if (vm_op_done(vm, "cancelled by stop") == -1)
			return 0;
	}
	if (vm->vm_op == VM_OP_STOP) {
		cause_set(cause, "vm %s: already stopping", vm->vm_name);
		return -1;
	}
	vm->vm_op = VM_OP_STOP;
	vm->vm_opcb = done;
	vm->vm_flags |= VM_F_WANT_EXIT;
	vm->vm_state = VM_STOPPING;
	if (grace_ms > 0 && vm->vm_qmp != NULL && qmp_is_ready(vm->vm_qmp) &&
	    qmp_command(vm->vm_qmp, "system_powerdown", NULL, VM_CMD_TIMEOUT_MS,
	    vm_powerdown_reply, vm, NULL) == 0) {
		vm_timer_in(vm, grace_ms, vm_grace_timer);
		return 0;
	}
	vm_stop_quit(vm);
	return 0;
}

/* --- stats, free ----------------------------------------------------- */

void
vm_stats(struct vm *vm, struct vm_stats *st)
{
	char *path, *text = NULL, *p;
	unsigned long long ut, stt;

	memset(st, 0, sizeof(*st));
	st->state = vm->vm_state;
	st->pid = vm->vm_pid;
	st->cgroup_bytes = vm_cgroup_memory(&vm->vm_cg);
	st->cgroup_limit = vm_cgroup_memory_limit(&vm->vm_cg);
	if (vm->vm_con != NULL) {
		st->console_bytes = vm_console_bytes(vm->vm_con);
		st->console_dropped = vm_console_dropped(vm->vm_con);
	}
	if (vm->vm_pid <= 0 || (vm->vm_flags & VM_F_DEAD))
		return;
	xasprintf(&path, "/proc/%d/smaps_rollup", (int)vm->vm_pid);
	if (read_file(path, 65536, &text, NULL, NULL) == 0) {
		if ((p = strstr(text, "\nRss:")) != NULL)
			st->rss_kb = strtoull(p + 5, NULL, 10);
		if ((p = strstr(text, "\nPss:")) != NULL)
			st->pss_kb = strtoull(p + 5, NULL, 10);
		free(text);
	}
	free(path);
	xasprintf(&path, "/proc/%d/stat", (int)vm->vm_pid);
	if (read_file(path, 4096, &text, NULL, NULL) == 0) {
		/* Fields after the ")" of comm: state is 3rd, utime 14th, stime 15th. */
		if ((p = strrchr(text, ')')) != NULL &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		    &ut, &stt) == 2)
			st->cpu_seconds = (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
		free(text);
	}
	free(path);
}

static void
vm_release(struct vm *vm)
{
	free(vm->vm_name);
	free(vm->vm_template);
	free(vm->vm_kernel_id);
	free(vm->vm_qmp_path);
	free(vm->vm_console_path);
	free(vm->vm_agent_path);
	free(vm->vm_guest_stop);
	free(vm->vm_qmp_err);
	free(vm->vm_snap_id);
	free(vm->vm_exit_why);
	free(vm);
}

static void
vm_release_v(void *arg)
{
	vm_release(arg);
}

void
vm_hold(struct vm *vm)
{
	ref_get(&vm->vm_ref);
}

int
vm_put(struct vm *vm)
{
	return ref_put(&vm->vm_ref, vm_release_v, vm);
}

void
vm_free(struct vm *vm)
{
	if (vm == NULL || ref_kill(&vm->vm_ref))
		return;
	if (vm->vm_timer != NULL) {
		event_free(vm->vm_timer);
		vm->vm_timer = NULL;
	}
	if (vm->vm_qmp != NULL) {
		qmp_free(vm->vm_qmp);
		vm->vm_qmp = NULL;
	}
	vm_console_free(vm->vm_con);
	vm->vm_con = NULL;
	if (vm->vm_pid > 0 && !(vm->vm_flags & VM_F_DEAD)) {
		/* Synchronous on purpose: SIGKILL'd QEMU is gone in milliseconds. */
		if (vm->vm_pidfd != -1)
			syscall(SYS_pidfd_send_signal, vm->vm_pidfd, SIGKILL, NULL, 0);
		else
			kill(vm->vm_pid, SIGKILL);
		if (vm->vm_flags & VM_F_ADOPTED) {
			/* Not our child: wait for the exit itself (init reaps it). */
			struct pollfd pfd = { vm->vm_pidfd, POLLIN, 0 };
			while (poll(&pfd, 1, VM_QUIT_TIMEOUT_MS) == -1 && errno == EINTR)
				;
		} else {
			while (waitpid(vm->vm_pid, NULL, 0) == -1 && errno == EINTR)
				;
		}
		vm->vm_flags |= VM_F_DEAD;
	}
	if (vm->vm_pidev != NULL)
		event_free(vm->vm_pidev);
	vm->vm_pidev = NULL;
	if (vm->vm_pidfd != -1)
		close(vm->vm_pidfd);
	vm->vm_pidfd = -1;
	if (vm->vm_cg.vc_ndirs > 0 && vm_cgroup_destroy(&vm->vm_cg, NULL) == -1)
		log_warnx("vm %s: cgroup not removed", vm->vm_name);
	if (vm->vm_snapfd != -1) {
		close(vm->vm_snapfd);
		vm->vm_snapfd = -1;
		stor_snapshot_abort(&vm->vm_snap);
	}
	stor_snapshot_free(&vm->vm_snap);
	if (vm->vm_devfd != -1) {
		close(vm->vm_devfd);
		vm->vm_devfd = -1;
	}
	/* The owner's reference; inside one of our callbacks the frame's holds vm until it unwinds. */
	vm_put(vm);
}
