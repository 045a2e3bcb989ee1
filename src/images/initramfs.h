/* Writing the initramfs: airlock-init as /init plus the virtio modules, newc cpio. */
#ifndef AIRLOCK_INITRAMFS_H
#define AIRLOCK_INITRAMFS_H

/*
 * Write an uncompressed newc cpio to out (atomically): /init (from init_bin),
 * /dev/console, and every *.ko in modules_dir under /lib/modules.
 * Uncompressed because decompressing under TCG costs boot time.
 */
int initramfs_write(const char *init_bin, const char *modules_dir, const char *out,
    char **cause);

#endif
