/*
 * A volume's ext4 journal replayed before a read-only attach
 * (docs/volumes.md "Crash consistency"). A guest whose VMM died (or was
 * killed: a crash, a failed claim, a delete of a guest that did not
 * freeze) with a volume mounted read-write leaves its journal to replay,
 * and the next read-only attach cannot: the disk is read-only to the guest
 * (QEMU readonly=on), so its kernel refuses the mount, and norecovery would
 * show data from before the last commits. A read-write attach needs
 * nothing here (the guest's own kernel replays it).
 *
 * So before a create or claim boots with a read-only volume, its
 * superblock is read (two fields at fixed offsets, the only guest-written
 * bytes airlockd itself parses); when it needs recovery, e2fsck replays
 * the journal (-E journal_only) on a copy, jailed as a VMM is:
 *
 *   - the volume is reflinked into a scratch sandbox dir of its own
 *     (stor_sandbox_create: a jail uid of its own owns the copy), which is
 *     all of the data dir the jail sees (at /sandbox); the volume file
 *     itself is never given to it;
 *   - e2fsck runs in vm_jail: that uid, no capabilities, no_new_privs, new
 *     pid, mount, ipc, uts and network namespaces, a read-only root with
 *     /usr only, and rlimits on address space, CPU time, files and
 *     processes; airlockd kills it after SBM_REPLAY_TIMEOUT_MS;
 *   - only an exit of 0-2 whose copy is still a regular file of that uid,
 *     of the volume's size, with the recovery flag cleared, is reflinked
 *     back over the volume (FICLONE: the whole file at once); anything
 *     else fails the create with e2fsck's status and the tail of its
 *     output.
 *
 * A compromised e2fsck can only write its copy, which is checked before
 * use: no worse than the guest that wrote the volume. No root process ever
 * parses the journal.
 *
 * No one else can have the volume meanwhile: the attach that asks holds it
 * read-only (no writer exists), and every read-only holder mounted it clean
 * or waits here. Replays of one file run once: later askers wait on it.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>

#include "images/reflink.h"
#include "vm/console_file.h"
#include "sandbox/sbm_impl.h"
#include "sandbox/sbm_volume.h"
#include "vm/vm_jail.h"

#define SBM_REPLAY_E2FSCK	"/usr/sbin/e2fsck"
#define SBM_REPLAY_TIMEOUT_MS	120000
#define SBM_REPLAY_AS_BYTES	(1ULL << 30)	/* e2fsck's address space */
#define SBM_REPLAY_CPU_S	60

#define EXT4_SB_OFFSET		1024
#define EXT4_SB_MAGIC		0xef53
#define EXT4_COMPAT_HAS_JOURNAL	0x0004
#define EXT4_INCOMPAT_RECOVER	0x0004

static uint32_t
le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int
sbm_ext4_needs_replay(const unsigned char *sb, size_t len)
{
	if (len < 0x64 || (sb[0x38] | sb[0x39] << 8) != EXT4_SB_MAGIC)
		return 0;	/* not ext4: the guest's mount says what it is */
	return (le32(sb + 0x5c) & EXT4_COMPAT_HAS_JOURNAL) &&
	    (le32(sb + 0x60) & EXT4_INCOMPAT_RECOVER);
}

/* The superblock of an open image: 1 when its journal needs replaying, 0 not, -1 errno. */
static int
fd_needs_replay(int fd)
{
	unsigned char buf[1024];
	ssize_t n;

	if ((n = pread(fd, buf, sizeof(buf), EXT4_SB_OFFSET)) == -1)
		return -1;
	return sbm_ext4_needs_replay(buf, (size_t)n);
}

struct sb_replay {
	struct sbm		*m;
	char			*file;		/* the volume's */
	char			*what;		/* "volume <project>/<name>", for messages */
	char			 id[SBM_ID_LEN + 1];	/* its scratch sandbox dir */
	struct stor_sandbox	 ss;
	int			 have_ss;
	pid_t			 pid;
	int			 pidfd;
	struct event		*ev, *timer;
	double			 t0;
	struct sandbox		**waiters;
	size_t			 nwaiters;
	TAILQ_ENTRY(sb_replay)	 entry;
};

/* The last bytes of e2fsck's output, as printable text (it echoes guest-chosen labels). */
static char *
replay_output(struct sb_replay *r)
{
	char buf[512];
	ssize_t n = 0;
	off_t size;
	int fd;

	if (!r->have_ss ||
	    (fd = open(r->ss.ss_qemulog, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return xstrdup("");
	if ((size = lseek(fd, 0, SEEK_END)) > 0)
		n = pread(fd, buf, sizeof(buf), size > (off_t)sizeof(buf) ? size -
		    (off_t)sizeof(buf) : 0);
	close(fd);
	return console_escape(buf, n > 0 ? (size_t)n : 0, NULL);
}

/*
 * Each waiter learns the outcome (notify 0: airlockd exits, nobody is
 * told); the last of a sandbox's replays runs its then.
 */
static void
replay_end(struct sb_replay *r, const char *error, int notify)
{
	struct sandbox *sb;
	void (*then)(struct sandbox *, const char *);
	char *cause = NULL;
	size_t i;

	TAILQ_REMOVE(&r->m->replays, r, entry);
	if (r->ev != NULL)
		event_free(r->ev);
	if (r->timer != NULL)
		event_free(r->timer);
	if (r->pidfd != -1)
		close(r->pidfd);
	if (r->have_ss && stor_sandbox_destroy(&r->ss, &cause) == -1) {
		log_warnx("%s: %s", r->what, cause);
		free(cause);
	}
	if (r->have_ss)
		stor_sandbox_free(&r->ss);
	for (i = 0; i < r->nwaiters; i++) {
		sb = r->waiters[i];
		if (error != NULL && sb->replay_err == NULL)
			sb->replay_err = xstrdup(error);
		if (--sb->replays == 0) {
			then = notify && !ref_dead(&sb->ref) ? sb->replay_then : NULL;
			sb->replay_then = NULL;
			if (then != NULL)
				then(sb, sb->replay_err);
			free(sb->replay_err);
			sb->replay_err = NULL;
		}
		sb_unref(sb);
	}
	free(r->waiters);
	free(r->file);
	free(r->what);
	free(r);
}

/* The copy e2fsck left, checked, then reflinked over the volume. */
static int
replay_commit(struct sb_replay *r, char **cause)
{
	struct stat st, vst;
	int in = -1, out = -1, rc = -1, need;

	in = open(r->ss.ss_rootfs, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	out = open(r->file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in == -1 || out == -1) {
		cause_set(cause, "open %s: %s", in == -1 ? "its replayed copy" : r->file,
		    strerror(errno));
		goto out;
	}
	if (fstat(in, &st) == -1 || fstat(out, &vst) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_uid != r->ss.ss_uid || st.st_size != vst.st_size) {
		cause_set(cause, "its replayed copy is not a file of the volume's size (refused)");
		goto out;
	}
	if ((need = fd_needs_replay(in)) != 0) {
		cause_set(cause, "%s", need == -1 ? strerror(errno) :
		    "its journal still needs recovery after e2fsck");
		goto out;
	}
	if (reflink_fds(in, out, r->ss.ss_rootfs, r->file, cause) == -1)
		goto out;
	if (fsync(out) == -1) {
		cause_set(cause, "fsync %s: %s", r->file, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (in != -1)
		close(in);
	if (out != -1)
		close(out);
	return rc;
}

static void
replay_exited(evutil_socket_t fd, short what, void *arg)
{
	struct sb_replay *r = arg;
	char *cause = NULL, *tail, *msg;
	int status = 0, code;

	if (waitpid(r->pid, &status, WNOHANG) != r->pid)
		return;
	r->pid = -1;
	code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	/* e2fsck: 0 clean, 1 corrected (the replay), 2 corrected, reboot (a mounted root: not ours). */
	if (code < 0 || code > 2 || replay_commit(r, &cause) == -1) {
		tail = replay_output(r);
		if (code < 0 || code > 2)
			xasprintf(&msg, "%s: replaying its journal failed (e2fsck %s %d): %s", r->what,
			    code < 0 ? "killed by signal" : "exit status", code < 0 ?
			    (WIFSIGNALED(status) ? WTERMSIG(status) : 0) : code, tail);
		else
			xasprintf(&msg, "%s: replaying its journal failed: %s", r->what, cause);
		log_warnx("%s", msg);
		replay_end(r, msg, 1);
		free(msg);
		free(tail);
		free(cause);
		return;
	}
	log_info("%s: journal replayed in a jail (e2fsck as uid %u) in %.0f ms", r->what,
	    (unsigned)r->ss.ss_uid, monotonic_ms_since(r->t0));
	replay_end(r, NULL, 1);
}

static void
replay_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct sb_replay *r = arg;

	/* replay_exited reaps it and says so (killed by signal 9). */
	if (r->pid > 0)
		syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
}

static int
replay_spawn(struct sb_replay *r, char **cause)
{
	struct timeval tv = { SBM_REPLAY_TIMEOUT_MS / 1000, (SBM_REPLAY_TIMEOUT_MS % 1000) * 1000 };
	char *const argv[] = { "e2fsck", "-p", "-E", "journal_only",
	    VM_JAIL_SANDBOX "/rootfs.ext4", NULL };
	struct vm_jail j;
	int errfd, rc;

	do {
		random_id(r->id, SBM_ID_LEN);
	} while (sb_find_any(r->m, r->id) != NULL);
	/* Its own dir, jail uid and reflink of the volume (mem_bytes 0: no guest RAM). */
	if (stor_sandbox_create(r->id, r->file, 0, &r->ss, cause) == -1)
		return -1;
	r->have_ss = 1;
	if ((errfd = open(r->ss.ss_qemulog, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		cause_set(cause, "open %s: %s", r->ss.ss_qemulog, strerror(errno));
		return -1;
	}
	memset(&j, 0, sizeof(j));
	j.root = r->ss.ss_jaildir;
	j.sandbox_dir = r->ss.ss_vmdir;
	j.uid = r->ss.ss_uid;
	j.gid = r->ss.ss_gid;
	j.netns_fd = -1;
	j.stderr_fd = errfd;
	j.exe = SBM_REPLAY_E2FSCK;
	j.as_bytes = SBM_REPLAY_AS_BYTES;
	j.cpu_s = SBM_REPLAY_CPU_S;
	rc = vm_jail_spawn(&j, argv, &r->pid, cause);
	close(errfd);
	if (rc == -1)
		return -1;
	if ((r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0)) == -1) {
		cause_set(cause, "pidfd_open: %s", strerror(errno));
		kill(r->pid, SIGKILL);
		waitpid(r->pid, NULL, 0);
		r->pid = -1;
		return -1;
	}
	r->ev = event_new(r->m->base, r->pidfd, EV_READ | EV_PERSIST, replay_exited, r);
	event_add(r->ev, NULL);
	r->timer = evtimer_new(r->m->base, replay_timeout, r);
	evtimer_add(r->timer, &tv);
	return 0;
}

/* sb waits for r (a reference each). */
static void
replay_wait(struct sb_replay *r, struct sandbox *sb)
{
	r->waiters = xreallocarray(r->waiters, r->nwaiters + 1, sizeof(*r->waiters));
	r->waiters[r->nwaiters++] = sb;
	sb_ref(sb);
	sb->replays++;
}

/* A replay of file, started; NULL with *cause when it cannot start. */
static struct sb_replay *
replay_start(struct sbm *m, const char *file, const char *project, const char *name,
    char **cause)
{
	struct sb_replay *r = xcalloc(1, sizeof(*r));

	r->m = m;
	r->file = xstrdup(file);
	xasprintf(&r->what, "volume %s/%s", project, name);
	r->pid = -1;
	r->pidfd = -1;
	r->t0 = monotonic_msf();
	TAILQ_INSERT_TAIL(&m->replays, r, entry);
	if (replay_spawn(r, cause) == -1) {
		cause_wrap(cause, "%s: replaying its journal", r->what);
		replay_end(r, NULL, 0);
		return NULL;
	}
	log_info("%s: its journal needs recovery before a read-only attach: replaying it in a "
	    "jail (pid %d)", r->what, (int)r->pid);
	return r;
}

void
sb_volumes_replay(struct sandbox *sb, void (*then)(struct sandbox *, const char *))
{
	struct store_attachment *atts = NULL;
	struct sb_replay *r;
	char *file, *cause = NULL;
	size_t n = 0, i;
	int fd, need;

	if (store_volume_attachments(sb->m->store, sb->rec.id, &atts, &n, &cause) == -1) {
		then(sb, cause);
		free(cause);
		return;
	}
	sb->replays = 1;	/* ours until every replay is asked */
	sb->replay_then = then;
	for (i = 0; i < n && cause == NULL; i++) {
		if (!atts[i].read_only)
			continue;	/* the guest's kernel replays a read-write one itself */
		file = sbm_volume_file(sb->rec.project, atts[i].volume);
		need = (fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1 ? 0 :
		    fd_needs_replay(fd);
		if (fd != -1)
			close(fd);
		/* Flagged, or a replay of it still running (the flag clears only at its end). */
		TAILQ_FOREACH(r, &sb->m->replays, entry)
			if (strcmp(r->file, file) == 0)
				break;
		if (r == NULL && need == 1)
			r = replay_start(sb->m, file, sb->rec.project, atts[i].volume, &cause);
		if (r != NULL)
			replay_wait(r, sb);
		free(file);
	}
	free(atts);
	if (cause != NULL) {
		log_warnx("sandbox %s: %s", sb->rec.id, cause);
		if (sb->replay_err == NULL)
			sb->replay_err = cause;
		else
			free(cause);
	}
	if (--sb->replays == 0) {
		sb->replay_then = NULL;
		then(sb, sb->replay_err);
		free(sb->replay_err);
		sb->replay_err = NULL;
	}
}

void
sb_volumes_replay_free(struct sbm *m)
{
	struct sb_replay *r;

	while ((r = TAILQ_FIRST(&m->replays)) != NULL) {
		if (r->pid > 0) {
			syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
			waitpid(r->pid, NULL, 0);
			r->pid = -1;
		}
		replay_end(r, NULL, 0);
	}
}
