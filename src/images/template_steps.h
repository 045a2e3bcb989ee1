/*
 * The step cache of template builds (docs/templates.md "Step cache"). The
 * rootfs after each run step is kept as a reflink in $DATA/steps/<key>.ext4
 * (the data dir: reflinks need the same filesystem as the images)
 * where key chains the base image's key with every step before it, so a
 * rebuild after editing step k finds steps 1..k-1 and boots from there.
 * Entries are immutable; their mtime is the last use, and the cache is
 * pruned oldest first to a byte budget (template_cache_mb) counted in
 * allocated blocks (reflinks share most of theirs with the image they came
 * from, so this overcounts: the bound is safe, never exceeded).
 */
#ifndef AIRLOCK_TEMPLATE_STEPS_H
#define AIRLOCK_TEMPLATE_STEPS_H

#include <stdint.h>

/* key = sha256("step v1", prev, step text, context digest or ""). */
void tsteps_key(const char *prev, const char *step, const char *context_sha, char out[65]);
/* The cache entry's path (malloc'd), whether or not it exists. */
char *tsteps_path(const char *key);
/* 1 and the path's mtime touched when key is cached, else 0. */
int tsteps_lookup(const char *key);
/* Reflink image into the cache as key (atomically; an existing entry stays). */
int tsteps_store(const char *image, const char *key, char **cause);
/* Remove least recently used entries until the cache holds at most max_bytes. */
void tsteps_prune(uint64_t max_bytes, const char *keep);

#endif
