/* /init's "volumes": the extra disks airlockd attached, mounted by serial. */
#ifndef AIRLOCK_AGENT_VOLUMES_H
#define AIRLOCK_AGENT_VOLUMES_H

#include <stddef.h>

#include <jansson.h>

#define AGENT_VOLUMES_MAX	8

/* Validate [{serial, path, read_only}] (pure: the /init fuzzer reaches it). 0 or -1. */
int volumes_parse(json_t *v, char *err, size_t errlen);
/*
 * Mount each at its path (made if missing): the disk whose
 * /sys/block/vdX/serial is serial, ext4, read-only when asked. A path that
 * already has that disk mounted (a restored guest) is left as it is.
 */
int volumes_mount(json_t *v, char *err, size_t errlen);

/*
 * Freeze or thaw the read-write volumes of a parsed "volumes" list that are
 * mounted at their paths (docs/volumes.md "Crash consistency"). FIFREEZE
 * writes everything back, checkpoints the journal and clears ext4's
 * needs_recovery, then blocks writers: the host freezes before it deletes
 * (the VMM is killed) or suspends (the guest's memory is kept frozen) a
 * sandbox, so the volume's file is consistent without a journal replay.
 * /init thaws what a restored guest had frozen (volumes_mount). A path
 * where the volume is not mounted is skipped. volumes_fz_load copies what
 * volumes_fz_run needs (it runs in a work thread: plain syscalls only).
 */
struct volumes_fz {
	int	 thaw;
	int	 n;
	char	 serial[AGENT_VOLUMES_MAX][24];
	char	 path[AGENT_VOLUMES_MAX][256];
	int	 done;		/* how many were frozen (or thawed) */
	int	 rc;
	char	 err[256];
};
void volumes_fz_load(json_t *v, int thaw, struct volumes_fz *f);
void volumes_fz_run(struct volumes_fz *f);

#endif
