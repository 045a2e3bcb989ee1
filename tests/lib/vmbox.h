/*
 * A sandbox of the VM engine tests, below airlockd: its disk (a reflinked
 * copy of a rootfs), optionally its island with the netns and tap fds, and
 * its VM. box_destroy takes down whatever of it exists, in the reverse
 * order, so a test can call it after any failed step. Shared by test_vm.c
 * and test_vm_spare.c.
 */
#ifndef AIRLOCK_TEST_VMBOX_H
#define AIRLOCK_TEST_VMBOX_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "images/stor_sandbox.h"
#include "images/stor_snapshot.h"
#include "net/net_island.h"
#include "vm/vm.h"
#include "leftovers.h"
#include "vmtest.h"
#include "../unit/t.h"

/* How long a stop may take before it counts as a hang (TCG on a loaded host). */
#define BOX_STOP_MS	180000

struct box {
	char			*name;
	struct stor_sandbox	 ss;
	struct net_island	 ni;
	int			 nsfd, tapfd;
	struct vt		 t;
};

/* Box "TAG-SUFFIX" on a 256 MiB copy of rootfs_src; in an island of its own
 * when island is set (nsfd and tapfd open), else without a network. */
static __attribute__((unused)) int
box_create(struct box *b, const char *tag, const char *suffix, const char *rootfs_src,
    int island)
{
	char *cause = NULL;

	memset(b, 0, sizeof(*b));
	b->nsfd = b->tapfd = -1;
	xasprintf(&b->name, "%s-%s", tag, suffix);
	if (stor_sandbox_create(b->name, rootfs_src, 256ULL << 20, &b->ss, &cause) == -1)
		goto bad;
	if (island) {
		if (net_island_create(b->name, &b->ni, &cause) == -1 ||
		    (b->nsfd = net_island_open_ns(&b->ni, &cause)) == -1 ||
		    (b->tapfd = net_island_open_tap(&b->ni, &cause)) == -1)
			goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "box %s: %s\n", b->name, cause);
	free(cause);
	return -1;
}

/* Stop the VM if it still runs (a check: it must reach EXITED), then the
 * fds, the island and the disk. */
static __attribute__((unused)) void
box_destroy(struct box *b)
{
	char *cause = NULL;

	if (b->t.vm != NULL) {
		if (vm_state(b->t.vm) != VM_EXITED) {
			b->t.done = 0;
			if (vm_stop(b->t.vm, 0, vt_done, &cause) == 0)
				vt_wait_flag(&b->t.done, BOX_STOP_MS);
			else
				free(cause);
			cause = NULL;
			CHECK(vm_state(b->t.vm) == VM_EXITED);
		}
		vm_free(b->t.vm);
		b->t.vm = NULL;
	}
	if (b->tapfd != -1)
		close(b->tapfd);
	if (b->nsfd != -1)
		close(b->nsfd);
	if (b->ni.ni_path != NULL && net_island_delete(&b->ni, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
		cause = NULL;
	}
	if (b->ss.ss_dir != NULL && stor_sandbox_destroy(&b->ss, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
	}
	vt_clear(&b->t);
	free(b->name);
}

/* A test's end: its snapshot dir removed if it is still there, then the
 * host objects named by tag (leftovers.h) must equal those listed before
 * the first box; frees before. */
static __attribute__((unused)) void
box_finish(const char *tag, const char *snap_dir, char *before)
{
	char *after, *cause = NULL;

	if (access(snap_dir, F_OK) == 0 && stor_snapshot_remove(snap_dir, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
	}
	after = leftovers(tag);
	CHECK_STR(after, before);
	free(before);
	free(after);
}

#endif
