/*
 * Snapshot directories and their header. A snapshot is built in
 * snapshots/.tmp-<id> and renamed to snapshots/<id> only once every file and
 * the header are on disk, so a crash or ENOSPC never leaves a half snapshot
 * that looks complete.
 *
 * snapshot.json (format STOR_SNAP_FORMAT):
 *   { "format": 1, "template": "base", "kernel": "<vmlinux sha256 or release>",
 *     "memory_mb": 256, "vcpus": 2, "devices": "virtio-blk,virtio-rng,...",
 *     "devstate_sha256": "...", "devstate_size": N, "mem_size": N,
 *     "created": "2026-11-30T08:00:00Z" }
 * A restore compares template, kernel, memory, vcpus and devices with what
 * it is about to start and checks the device state checksum first.
 */
#ifndef AIRLOCK_STOR_SNAPSHOT_H
#define AIRLOCK_STOR_SNAPSHOT_H

#include <stdint.h>

#define STOR_SNAP_FORMAT	1
#define STOR_SNAP_HEADER	"snapshot.json"
#define STOR_SNAP_DEVSTATE	"devstate"
#define STOR_SNAP_MEM		"mem"
#define STOR_SNAP_ROOTFS	"rootfs.ext4"
#define STOR_SNAP_HEADER_MAX	(64 * 1024)
#define STOR_SNAP_DEVSTATE_MAX	(64ULL << 20)	/* device state is ~50-70 KB */

struct stor_snap_header {
	int		 format;
	char		*template;
	char		*kernel;
	unsigned	 memory_mb;
	unsigned	 vcpus;
	char		*devices;
	char		 devstate_sha256[65];
	uint64_t	 devstate_size;
	uint64_t	 mem_size;
	char		*created;
};

struct stor_snapshot {
	char	*sn_id;
	char	*sn_dir;	/* final: snapshots/<id> */
	char	*sn_tmp;	/* while building: snapshots/.tmp-<id> */
};

/* Make the temporary directory; fails when <id> already exists. */
int stor_snapshot_begin(const char *id, struct stor_snapshot *sn, char **cause);
/* Path of a file in the temporary dir (malloc'd). */
char *stor_snapshot_tmp_path(const struct stor_snapshot *sn, const char *file);
/* Write the header, make files read-only, fsync, rename into place. */
int stor_snapshot_commit(struct stor_snapshot *sn, const struct stor_snap_header *h,
    char **cause);
/* Remove the temporary dir (after a failure). */
void stor_snapshot_abort(struct stor_snapshot *sn);
void stor_snapshot_free(struct stor_snapshot *sn);

/* Remove a committed snapshot. */
int stor_snapshot_remove(const char *dir, char **cause);

/* Parse and validate header bytes (fuzzed: snapshots may come from elsewhere). */
int stor_snap_header_parse(const char *text, size_t len, struct stor_snap_header *h,
    char **cause);
/* Load and validate a header from a snapshot dir. */
int stor_snapshot_load(const char *dir, struct stor_snap_header *h, char **cause);
void stor_snap_header_free(struct stor_snap_header *h);

/* SHA-256 of an open file from offset 0, with its size; the offset is left at 0. */
int stor_fd_sha256(int fd, uint64_t max, char out[65], uint64_t *size, char **cause);

/*
 * A sealed memfd holding the snapshot's memory file: many clones map it
 * MAP_PRIVATE (share=off) and share its pages; the seals make it
 * immutable, so a compromised QEMU cannot change what other clones see.
 */
int stor_snapshot_memfd(const char *dir, uint64_t size, int *fd, char **cause);

#endif
