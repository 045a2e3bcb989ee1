/*
 * Spare VMMs and the event-driven device state stream, real QEMU (TCG
 * here), jailed, each sandbox in its own island (issue 13, Tier 1):
 *   - a snapshot is written without polling: the QMP trace shows getfd,
 *     migrate fd:, the MIGRATION "completed" event and no query-migrate;
 *   - a spare (vm_spawn_incoming on a sealed base memfd) waits with no
 *     guest running; vm_incoming restores the snapshot into it: the guest
 *     continues with its tmpfs marker, answers on its agent port, and the
 *     trace shows getfd + migrate-incoming fd: + MIGRATION completed + cont
 *     and no query-status; QEMU has no child process (no sh/cat);
 *   - a spare started on its own RAM file gets the snapshot's RAM in place;
 *   - a spare whose config (template, base memory, mode) does not match
 *     the snapshot is refused with a cause and keeps waiting, untouched;
 *   - a spare killed while waiting is reported (exit event) and refused;
 *   - vm_restore (the two halves in sequence) uses the same event path;
 *   - afterwards no netns, mount, cgroup or QEMU process is left.
 * No wall-clock assertions: timeouts only catch hangs.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "net/net_island.h"
#include "images/stor_snapshot.h"
#include "leftovers.h"
#include "vmtest.h"
#include "vmbox.h"
#include "../unit/t.h"

#define BOOT_MS		180000
#define OP_MS		180000
#define TEST_APPEND	"airlock.init=/airlock-test-init"

static char tag[32];
static char *snap_id, *snap_dir, *snap_rootfs;
static int base_memfd = -1;

/* Child processes of pid (any thread): an exec: URI would show sh + cat here. */
static int
proc_children(pid_t pid)
{
	char *dir, *p, *text = NULL;
	struct dirent *de;
	DIR *d;
	int n = 0;

	xasprintf(&dir, "/proc/%d/task", (int)pid);
	if ((d = opendir(dir)) == NULL) {
		free(dir);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		xasprintf(&p, "%s/%s/children", dir, de->d_name);
		if (read_file(p, 4096, &text, NULL, NULL) == 0) {
			if (strspn(text, " \n") != strlen(text))
				n++;
			free(text);
		}
		free(p);
	}
	closedir(d);
	free(dir);
	return n;
}

/* The QMP trace of a restore: the event path, fd transport, no polling. */
static void
check_incoming_trace(struct vm *vm)
{
	struct vm_timings tm;
	const char *t;

	vm_timings(vm, &tm);
	t = tm.qmp_trace;
	fprintf(stderr, "   qmp: %s\n", t);
	CHECK(strstr(t, "getfd,migrate-incoming(fd:airlock-devstate)") != NULL);
	CHECK(strstr(t, "MIGRATION:completed") != NULL);
	CHECK(strstr(t, "MIGRATION:completed") < strstr(t, "cont"));
	CHECK(strstr(t, "query-status") == NULL);
	CHECK(strstr(t, "exec:") == NULL);
}

/* The restored guest: counter continues, tmpfs marker there, its port answers. */
static void
check_continues(struct box *b, const char *touch)
{
	char cmd[64], want[64];

	CHECK(vm_state(b->t.vm) == VM_RUNNING);
	CHECK(vt_wait_line(&b->t, 0, "before-snap,", OP_MS) >= 0);
	snprintf(cmd, sizeof(cmd), "touch %s\n", touch);
	CHECK(vt_send(&b->t, cmd) == 0);
	snprintf(want, sizeof(want), "DONE touch %s", touch);
	CHECK(vt_wait_line(&b->t, 0, want, OP_MS) >= 0);
	CHECK(proc_children(vm_pid(b->t.vm)) == 0);
}

/* Boot with the test init, mark tmpfs, suspend into the snapshot. */
static int
make_snapshot(void)
{
	struct box a;
	struct vm_config c;
	struct vm_timings tm;
	struct stor_snap_header h;
	char *cause = NULL;
	int rc = -1;

	if (box_create(&a, tag, "src", vt_tp.rootfs, 1) == -1 || vt_install_init(&a.ss, &cause) == -1) {
		fprintf(stderr, "%s\n", cause ? cause : "");
		return -1;
	}
	c = vt_config(a.name, &a.ss, a.nsfd, a.tapfd, TEST_APPEND);
	a.t.vm = vm_boot(vt_base, &c, vt_event, vt_done, &a.t, &cause);
	if (a.t.vm == NULL || vt_wait_flag(&a.t.done, OP_MS) == -1 || !a.t.ok ||
	    vt_wait_line(&a.t, 0, "TESTINIT READY port=/dev/vport", BOOT_MS) < 0 ||
	    vt_send(&a.t, "touch before-snap\n") == -1 ||
	    vt_wait_line(&a.t, 0, "before-snap,", OP_MS) < 0) {
		fprintf(stderr, "source: %s\n", cause ? cause : a.t.error ? a.t.error : "?");
		goto out;
	}
	a.t.done = 0;
	if (vm_snapshot(a.t.vm, snap_id, 1, vt_done, &cause) == -1 ||
	    vt_wait_flag(&a.t.done, OP_MS) == -1 || !a.t.ok) {
		fprintf(stderr, "snapshot: %s\n", cause ? cause : a.t.error ? a.t.error : "?");
		goto out;
	}
	vm_timings(a.t.vm, &tm);
	fprintf(stderr, "   snapshot qmp: %s\n", tm.qmp_trace);
	/* The stream's end came as an event; nothing polled query-migrate. */
	CHECK(strstr(tm.qmp_trace, "getfd,migrate(fd:airlock-snap)") != NULL);
	CHECK(strstr(tm.qmp_trace, "MIGRATION:completed") != NULL);
	CHECK(strstr(tm.qmp_trace, "query-migrate") == NULL);
	CHECK(vt_wait_flag(&a.t.exited, OP_MS) == 0);
	if (stor_snapshot_load(snap_dir, &h, &cause) == -1 ||
	    stor_snapshot_memfd(snap_dir, h.mem_size, &base_memfd, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		goto out;
	}
	stor_snap_header_free(&h);
	rc = 0;
out:
	free(cause);
	box_destroy(&a);
	return rc;
}

static struct vm *
spawn_spare(struct box *b, struct vm_config *c, enum vm_restore_mem mode, int memfd)
{
	char *cause = NULL;

	b->t.done = 0;
	b->t.vm = vm_spawn_incoming(vt_base, c, mode, memfd, vt_event, vt_done, &b->t, &cause);
	if (b->t.vm == NULL) {
		fprintf(stderr, "   spare %s: %s\n", b->name, cause);
		free(cause);
		return NULL;
	}
	if (vt_wait_flag(&b->t.done, OP_MS) == -1 || !b->t.ok) {
		fprintf(stderr, "   spare %s: %s\n", b->name, b->t.error ? b->t.error : "timeout");
		return NULL;
	}
	return b->t.vm;
}

/* Restore into a spare on the sealed base: the second half only. */
static void
test_spare_shared(void)
{
	struct box b;
	struct vm_config c;
	struct vm_timings tm;
	char *cause = NULL;
	int i, n0;

	if (box_create(&b, tag, "spare", snap_rootfs, 1) == -1) {
		CHECK(0);
		return;
	}
	c = vt_config(b.name, &b.ss, b.nsfd, b.tapfd, NULL);
	CHECK(spawn_spare(&b, &c, VM_RESTORE_SHARED, base_memfd) != NULL);
	if (b.t.vm == NULL) {
		box_destroy(&b);
		return;
	}
	CHECK(vm_is_spare(b.t.vm));
	CHECK(vm_state(b.t.vm) == VM_STARTING);
	vm_timings(b.t.vm, &tm);
	fprintf(stderr, "   spare ready: spawned %.1f ms, qmp %.1f ms; qmp: %s\n", tm.spawned,
	    tm.qmp_ready, tm.qmp_trace);
	CHECK(strstr(tm.qmp_trace, "migrate-set-capabilities") != NULL);
	/* Waiting, no guest: nothing on the console. */
	n0 = b.t.nlines;
	for (i = 0; i < 5; i++)
		vt_run(100);
	CHECK(b.t.nlines == n0 && vt_find(&b.t, 0, "CNT ") == -1);

	b.t.done = 0;
	CHECK(vm_incoming(b.t.vm, snap_dir, VM_RESTORE_SHARED, base_memfd, vt_done, &cause) == 0);
	if (cause != NULL)
		fprintf(stderr, "   incoming: %s\n", cause);
	free(cause);
	CHECK(vt_wait_flag(&b.t.done, OP_MS) == 0 && b.t.ok);
	if (b.t.ok) {
		CHECK(!vm_is_spare(b.t.vm));
		vm_timings(b.t.vm, &tm);
		fprintf(stderr, "   into spare: checked %.1f ms, running %.1f ms\n", tm.checked,
		    tm.running);
		check_incoming_trace(b.t.vm);
		check_continues(&b, "in-spare");
		/* A second vm_incoming: it is no longer a spare. */
		CHECK(vm_incoming(b.t.vm, snap_dir, VM_RESTORE_SHARED, base_memfd, vt_done,
		    &cause) == -1);
		CHECK_CAUSE(cause, "not a waiting spare");
		free(cause);
		cause = NULL;
	}
	box_destroy(&b);
}

/* A spare on its own RAM file: the snapshot's RAM is reflinked in place. */
static void
test_spare_own(void)
{
	struct box b;
	struct vm_config c;
	char *cause = NULL, *id;

	if (box_create(&b, tag, "spareown", snap_rootfs, 1) == -1) {
		CHECK(0);
		return;
	}
	c = vt_config(b.name, &b.ss, b.nsfd, b.tapfd, NULL);
	CHECK(spawn_spare(&b, &c, VM_RESTORE_OWN, -1) != NULL);
	if (b.t.vm != NULL) {
		b.t.done = 0;
		CHECK(vm_incoming(b.t.vm, snap_dir, VM_RESTORE_OWN, -1, vt_done, &cause) == 0);
		free(cause);
		cause = NULL;
		CHECK(vt_wait_flag(&b.t.done, OP_MS) == 0 && b.t.ok);
		if (b.t.ok) {
			check_incoming_trace(b.t.vm);
			check_continues(&b, "in-own");
			/* Its RAM is its own: it can be snapshotted again. */
			xasprintf(&id, "%s-again", tag);
			b.t.done = 0;
			CHECK(vm_snapshot(b.t.vm, id, 0, vt_done, &cause) == 0);
			CHECK(vt_wait_flag(&b.t.done, OP_MS) == 0 && b.t.ok);
			free(cause);
			cause = NULL;
			CHECK(vt_wait_line(&b.t, b.t.nlines, "CNT ", OP_MS) >= 0);
			free(id);
			id = paths_data("snapshots/%s-again", tag);
			if (stor_snapshot_remove(id, &cause) == -1) {
				fprintf(stderr, "%s\n", cause);
				free(cause);
				cause = NULL;
			}
			free(id);
		}
	}
	box_destroy(&b);
}

/* Mismatches are refused with a cause; the spare keeps waiting, untouched. */
static void
test_spare_mismatch(void)
{
	struct box b;
	struct vm_config c;
	struct stor_snap_header h;
	char *cause = NULL, *before, *after;
	int other_memfd = -1;
	pid_t pid;

	if (box_create(&b, tag, "sparebad", snap_rootfs, 1) == -1) {
		CHECK(0);
		return;
	}
	c = vt_config(b.name, &b.ss, b.nsfd, b.tapfd, NULL);
	c.template_name = "python";
	CHECK(spawn_spare(&b, &c, VM_RESTORE_SHARED, base_memfd) != NULL);
	if (b.t.vm == NULL) {
		box_destroy(&b);
		return;
	}
	pid = vm_pid(b.t.vm);
	before = leftovers(tag);

	CHECK(vm_incoming(b.t.vm, snap_dir, VM_RESTORE_SHARED, base_memfd, vt_done,
	    &cause) == -1);
	CHECK_CAUSE(cause, "is of template \"base\", not \"python\"");
	fprintf(stderr, "   refused: %s\n", cause ? cause : "(accepted!)");
	free(cause);
	cause = NULL;

	CHECK(vm_incoming(b.t.vm, snap_dir, VM_RESTORE_OWN, -1, vt_done, &cause) == -1);
	CHECK_CAUSE(cause, "started for shared base memory");
	free(cause);
	cause = NULL;

	/* The same snapshot's RAM in another memfd: not the base it maps. */
	CHECK(stor_snapshot_load(snap_dir, &h, &cause) == 0 &&
	    stor_snapshot_memfd(snap_dir, h.mem_size, &other_memfd, &cause) == 0);
	stor_snap_header_free(&h);
	/* Template matching this time, so the base check is what refuses. */
	free(cause);
	cause = NULL;
	vt_run(10);
	after = leftovers(tag);
	CHECK_STR(after, before);
	free(after);
	/* Still waiting, the same process, no guest ran. */
	CHECK(vm_is_spare(b.t.vm) && vm_pid(b.t.vm) == pid && vm_state(b.t.vm) == VM_STARTING);
	CHECK(kill(pid, 0) == 0);
	CHECK(vt_find(&b.t, 0, "CNT ") == -1);
	box_destroy(&b);

	/* A matching-template spare on one base refuses a restore on another base. */
	if (box_create(&b, tag, "sparebase", snap_rootfs, 1) == -1) {
		CHECK(0);
		free(before);
		return;
	}
	c = vt_config(b.name, &b.ss, b.nsfd, b.tapfd, NULL);
	CHECK(spawn_spare(&b, &c, VM_RESTORE_SHARED, base_memfd) != NULL);
	if (b.t.vm != NULL) {
		CHECK(vm_incoming(b.t.vm, snap_dir, VM_RESTORE_SHARED, other_memfd, vt_done,
		    &cause) == -1);
		CHECK_CAUSE(cause, "maps another base memory");
		fprintf(stderr, "   refused: %s\n", cause ? cause : "(accepted!)");
		free(cause);
		cause = NULL;
		CHECK(vm_is_spare(b.t.vm));
	}
	box_destroy(&b);
	if (other_memfd != -1)
		close(other_memfd);
	free(before);
}

/* A spare that dies while it waits is reported and never used. */
static void
test_spare_killed(void)
{
	struct box b;
	struct vm_config c;
	char *cause = NULL;

	if (box_create(&b, tag, "sparekill", snap_rootfs, 1) == -1) {
		CHECK(0);
		return;
	}
	c = vt_config(b.name, &b.ss, b.nsfd, b.tapfd, NULL);
	CHECK(spawn_spare(&b, &c, VM_RESTORE_SHARED, base_memfd) != NULL);
	if (b.t.vm != NULL) {
		kill(vm_pid(b.t.vm), SIGKILL);
		CHECK(vt_wait_flag(&b.t.exited, OP_MS) == 0);
		CHECK(!b.t.exit_expected);
		CHECK(b.t.exit_reason != NULL && strstr(b.t.exit_reason, "signal 9") != NULL);
		CHECK(!vm_is_spare(b.t.vm));
		CHECK(vm_incoming(b.t.vm, snap_dir, VM_RESTORE_SHARED, base_memfd, vt_done,
		    &cause) == -1);
		CHECK_CAUSE(cause, "its VMM is gone: VMM killed by signal 9");
		fprintf(stderr, "   refused: %s\n", cause ? cause : "(accepted!)");
		free(cause);
	}
	box_destroy(&b);
}

/* vm_restore is spawn + incoming: the same event path, no polling. */
static void
test_restore_events(void)
{
	struct box b;
	struct vm_config c;
	char *cause = NULL;

	if (box_create(&b, tag, "restore", snap_rootfs, 1) == -1) {
		CHECK(0);
		return;
	}
	c = vt_config(b.name, &b.ss, b.nsfd, b.tapfd, NULL);
	b.t.vm = vm_restore(vt_base, &c, snap_dir, VM_RESTORE_SHARED, base_memfd, vt_event,
	    vt_done, &b.t, &cause);
	if (b.t.vm == NULL)
		fprintf(stderr, "   restore: %s\n", cause);
	free(cause);
	CHECK(b.t.vm != NULL);
	if (b.t.vm != NULL) {
		CHECK(vt_wait_flag(&b.t.done, OP_MS) == 0 && b.t.ok);
		if (b.t.ok) {
			check_incoming_trace(b.t.vm);
			check_continues(&b, "in-restore");
		}
	}
	box_destroy(&b);
}

int
main(void)
{
	char *before;

	signal(SIGPIPE, SIG_IGN);
	snprintf(tag, sizeof(tag), "tsp%ld", (long)getpid());
	if (vt_setup() == -1)
		return 1;
	xasprintf(&snap_id, "%s-snap", tag);
	snap_dir = paths_data("snapshots/%s", snap_id);
	xasprintf(&snap_rootfs, "%s/%s", snap_dir, STOR_SNAP_ROOTFS);
	before = leftovers(tag);
	fprintf(stderr, "-- make_snapshot\n");
	if (make_snapshot() == 0) {
		T_RUN(test_spare_shared);
		T_RUN(test_spare_own);
		T_RUN(test_spare_mismatch);
		T_RUN(test_spare_killed);
		T_RUN(test_restore_events);
	} else
		CHECK(!"no snapshot");
	if (base_memfd != -1)
		close(base_memfd);
	box_finish(tag, snap_dir, before);
	free(snap_id);
	free(snap_dir);
	free(snap_rootfs);
	vt_teardown();
	return t_done();
}
