/*
 * Confining a process that parses untrusted bytes once its setup is done
 * (the egress gateway, the API front): drop to an unprivileged uid/gid for
 * good, and a seccomp deny list of what an attacker would need after a
 * memory bug to leave the process (spawn, debug, change namespaces or
 * mounts, load kernel code, change ids). A deny list, not an allow list:
 * an allow list would have to track what OpenSSL and libevent call on
 * every upgrade (docs/security.md).
 *
 * Sanitizer (test) builds keep ptrace and dumpability: LeakSanitizer
 * stops the world with ptrace from a cloned helper at exit.
 */
#ifndef AIRLOCK_CONFINE_H
#define AIRLOCK_CONFINE_H

#include <sys/types.h>

#if defined(__SANITIZE_ADDRESS__)
#define CONFINE_SANITIZED	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONFINE_SANITIZED	1
#endif
#endif
#ifndef CONFINE_SANITIZED
#define CONFINE_SANITIZED	0
#endif

/*
 * setgroups/setresgid/setresuid to uid:gid (nothing for uid 0), checked
 * irreversible, then no new privileges and not dumpable. Fatal on failure.
 */
void confine_drop(uid_t uid, gid_t gid);

/*
 * Load the deny list. threads: clone stays allowed for threads (started
 * after this, so they run under it); otherwise every clone is refused.
 * Fatal on failure.
 */
void confine_seccomp(int threads);

#endif
