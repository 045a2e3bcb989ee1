/* Privilege drop and the seccomp deny list of the processes that parse untrusted bytes. */
#include <sys/prctl.h>

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <unistd.h>

#include <seccomp.h>

#include "common/confine.h"
#include "common/log.h"

void
confine_drop(uid_t uid, gid_t gid)
{
	if (uid == 0)
		return;
	if (setgroups(1, &gid) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1)
		fatal("drop privileges to %u:%u", (unsigned)uid, (unsigned)gid);
	if (setresuid(-1, 0, -1) != -1)
		fatalx("privileges could be regained");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("PR_SET_NO_NEW_PRIVS");
	/*
	 * Not dumpable: no core dumps with secrets, no ptrace (the id change
	 * already cleared it; said again for clarity). Sanitizer builds turn
	 * it back on for LeakSanitizer's tracer.
	 */
	prctl(PR_SET_DUMPABLE, CONFINE_SANITIZED ? 1 : 0, 0, 0, 0);
}

void
confine_seccomp(int threads)
{
	static const int denied[] = {
		SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(fork), SCMP_SYS(vfork),
		SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
		SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(pivot_root), SCMP_SYS(chroot),
		SCMP_SYS(setns), SCMP_SYS(unshare), SCMP_SYS(bpf), SCMP_SYS(perf_event_open),
		SCMP_SYS(init_module), SCMP_SYS(finit_module), SCMP_SYS(delete_module),
		SCMP_SYS(kexec_load), SCMP_SYS(kexec_file_load), SCMP_SYS(reboot),
		SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key),
		SCMP_SYS(userfaultfd), SCMP_SYS(personality), SCMP_SYS(acct),
		SCMP_SYS(swapon), SCMP_SYS(swapoff), SCMP_SYS(syslog), SCMP_SYS(open_by_handle_at),
		SCMP_SYS(name_to_handle_at), SCMP_SYS(iopl), SCMP_SYS(ioperm),
		SCMP_SYS(setuid), SCMP_SYS(setgid), SCMP_SYS(setreuid), SCMP_SYS(setregid),
		SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setgroups),
		SCMP_SYS(fsopen), SCMP_SYS(fsmount), SCMP_SYS(move_mount), SCMP_SYS(open_tree),
	};
	scmp_filter_ctx ctx;
	size_t i;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		fatalx("seccomp_init failed");
	for (i = 0; i < sizeof denied / sizeof denied[0]; i++) {
		if (CONFINE_SANITIZED && denied[i] == SCMP_SYS(ptrace))
			continue;
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0) != 0)
			fatalx("seccomp_rule_add %d failed", denied[i]);
	}
	/*
	 * clone only for threads (or not at all). glibc tries clone3 first,
	 * whose flags sit in a struct the filter cannot read: ENOSYS makes it
	 * fall back to clone, checked here. Sanitizer builds keep clone for
	 * LeakSanitizer's helper.
	 */
	if (!CONFINE_SANITIZED && (threads ?
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)) :
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 0)) != 0)
		fatalx("seccomp clone rule failed");
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0)
		fatalx("seccomp clone3 rule failed");
	if (seccomp_load(ctx) != 0)
		fatalx("seccomp_load failed");
	seccomp_release(ctx);
}
