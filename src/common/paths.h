/*
 * The data and cache directory layout (documented in docs/operations.md).
 *
 *   $AIRLOCK_DATA_DIR (default /var/lib/airlock, reflink-capable)
 *     ca/ca.crt, ca/ca.key (0600, never leaves the host)
 *     kernel/current -> <release>/ {vmlinux, modules/, initramfs.cpio, kernel.json}
 *     templates/<name>/ {rootfs.ext4, template.json}
 *     build/ (scratch for template builds)
 *   $AIRLOCK_CACHE_DIR (default /var/cache/airlock): downloads, debootstrap trees
 */
#ifndef AIRLOCK_PATHS_H
#define AIRLOCK_PATHS_H

#define AIRLOCK_DEFAULT_DATA_DIR	"/var/lib/airlock"
#define AIRLOCK_DEFAULT_CACHE_DIR	"/var/cache/airlock"
#define AIRLOCK_NAME_MAX		63	/* template and sandbox names */

const char *paths_data_dir(void);
const char *paths_cache_dir(void);
/* Returned strings are malloc'd. */
char *paths_data(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *paths_cache(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Names: [a-z0-9][a-z0-9._-]{0,62}, so they are safe as one path component. */
int paths_valid_name(const char *name);

#endif
