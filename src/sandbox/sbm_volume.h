/*
 * Volumes on sandboxes (docs/volumes.md): which volumes a sandbox has at
 * which guest paths, their attachment records in the store, the files
 * QEMU gets as extra disks, and what the guest agent's /init mounts.
 */
#ifndef AIRLOCK_SBM_VOLUME_H
#define AIRLOCK_SBM_VOLUME_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define SBM_VOLUME_SIZE_MB_MIN	16

/* $DATA/volumes/<project>/<name>.ext4 (malloc'd). */
char *sbm_volume_file(const char *project, const char *name);
/* A volume name: paths_valid_name. 1 if acceptable. */
int sbm_volume_valid_name(const char *name);
struct store;
/*
 * 1 (*status 409, a cause naming it) when project's volume `name` is
 * another cluster worker's than me (sbm_worker_name): its file is in that
 * worker's data dir, so only it attaches or deletes the volume. 0
 * otherwise, unknown names included.
 */
int sbm_volume_elsewhere(struct store *st, const char *me, const char *project,
    const char *name, int *status, char **cause);
/*
 * A create's "volumes": an array of at most VM_VOLUMES_MAX objects
 * {name, path, read_only?}, each name once, each path absolute, without
 * "." or "..", not "/" nor under a system directory, not nested in
 * another's. -1 with *field ("volumes[1].path") and a cause.
 */
int sbm_volumes_check(json_t *v, char *field, size_t fieldlen, char **cause);
/* 1 when a checked "volumes" fits the volume slots (a pool member can take it). */
int sbm_volumes_fit(json_t *v);
/*
 * An ext4 superblock (the len bytes at offset 1024 of an image): 1 when it
 * has a journal that needs recovery (a writer went without unmounting or
 * freezing), else 0 (also for anything not ext4). Pure.
 */
int sbm_ext4_needs_replay(const unsigned char *sb, size_t len);

#endif
