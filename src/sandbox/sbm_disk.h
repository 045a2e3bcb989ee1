/*
 * Growing a new sandbox's root filesystem to its disk_mb. The host only
 * extends the sparse raw image before boot (stor_sandbox_grow: free until
 * written); the guest grows its ext4 online with its own resize2fs, asked
 * for through the agent after /init. The host never parses the image:
 * templates come from recipes whose RUN steps ran as root in a build VM,
 * so a host-side e2fsprogs would read attacker-made metadata as root.
 */
#ifndef AIRLOCK_SBM_DISK_H
#define AIRLOCK_SBM_DISK_H

struct agent_client;
struct sbm_disk_grow;

/* Exactly once unless cancelled: error NULL when the guest's filesystem fills its disk. */
typedef void (*sbm_disk_done_cb)(const char *error, void *arg);

/* Run resize2fs /dev/vda as root in the guest; token is the sandbox's envd access token. */
struct sbm_disk_grow *sbm_disk_grow_start(struct agent_client *ac, const char *token,
    sbm_disk_done_cb done, void *arg, char **cause);
/* Stop waiting (no callback); the guest's resize2fs may still finish. */
void sbm_disk_grow_cancel(struct sbm_disk_grow *g);

#endif
