/*
 * Console capture without a VM: the real vm_console reader and
 * console_file writer on a real event loop, fed through a socketpair (the
 * same kind of socket QEMU's chardev gives us) into files in a temp dir.
 * Write failures are real too: RLIMIT_FSIZE makes write() fail with EFBIG.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/util.h"
#include "vm/console_file.h"
#include "vm/vm_console.h"
#include "t.h"

static char dir[] = "/tmp/test_vm_console.XXXXXX";

static void
check_escape(const char *in, size_t len, const char *want)
{
	size_t olen;
	char *out = console_escape(in, len, &olen);

	CHECK_STR(out, want);
	CHECK(olen == strlen(want));
	free(out);
}

static void
test_escape(void)
{
#define E(in, want) check_escape(in, sizeof(in) - 1, want)
	E("plain line\n", "plain line\n");
	E("a\0b\n", "a\\x00b\n");
	E("crlf\r\nnext\r\n", "crlf\nnext\n");
	E("bar\r50%\r\n", "bar\\x0d50%\n");
	E("esc \033[2J done", "esc \\x1b[2J done");
	E("tab\tdel\177", "tab\tdel\\x7f");
	E("back\\slash", "back\\\\slash");
	E("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	E("bad \xff \xc0\x80", "bad \\xff \\xc0\\x80");			/* invalid, overlong */
	E("sur \xed\xa0\x80", "sur \\xed\\xa0\\x80");			/* UTF-16 surrogate */
	E("csi \xc2\x9b" "31m", "csi \\xc2\\x9b31m");			/* C1 control */
	E("cut \xe2\x82", "cut \\xe2\\x82");				/* truncated at the end */
	E("big \xf4\x90\x80\x80", "big \\xf4\\x90\\x80\\x80");		/* above U+10FFFF */
#undef E
}

static size_t
fsize(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 ? (size_t)st.st_size : 0;
}

/* The cap holds over many rotations; what is kept is the newest suffix, split at lines. */
static void
test_file_cap(void)
{
	struct console_file cf;
	char *path, *old, *got, *all = NULL, line[300];
	size_t cap = 16384, alllen = 0, len, i;
	unsigned seed = 7;

	xasprintf(&path, "%s/cap.log", dir);
	xasprintf(&old, "%s.1", path);
	console_file_open(&cf, path, cap);
	for (i = 0; i < 5000; i++) {
		int n = snprintf(line, sizeof(line), "line %zu %.*s\n", i, (int)(rand_r(&seed) % 200),
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
		all = xreallocarray(all, 1, alllen + (size_t)n);
		memcpy(all + alllen, line, (size_t)n);
		alllen += (size_t)n;
		console_file_write(&cf, line, (size_t)n);
		CHECK(fsize(path) + fsize(old) <= cap);
	}
	CHECK(fsize(old) > 0 && fsize(old) <= cap / 2 && fsize(path) <= cap / 2);
	got = console_file_read(path, cap, &len);
	CHECK(len >= cap / 4 && len <= cap);
	CHECK(memcmp(got, all + alllen - len, len) == 0);	/* a suffix of the stream */
	CHECK(len > 0 && all[alllen - len - 1] == '\n');	/* starting at a line */
	free(got);
	/* A tail shorter than the current generation reads only from it. */
	got = console_file_read(path, 10, &len);
	CHECK(len == 10 && memcmp(got, all + alllen - 10, 10) == 0);
	free(got);
	CHECK(cf.cf_dropped == 0);
	console_file_close(&cf);
	/* A line longer than a generation is split, not kept whole past the cap. */
	console_file_remove(path);
	CHECK(fsize(path) == 0 && fsize(old) == 0);
	console_file_open(&cf, path, cap);
	{
		char *big = xmalloc(3 * cap);
		memset(big, 'z', 3 * cap);
		console_file_write(&cf, big, 3 * cap);
		free(big);
	}
	CHECK(fsize(path) + fsize(old) <= cap && fsize(path) + fsize(old) > 0);
	console_file_close(&cf);
	console_file_remove(path);
	free(all);
	free(path);
	free(old);
}

/* Bytes the disk refuses are counted and marked once writing works again. */
static void
test_file_drop(void)
{
	struct console_file cf;
	struct rlimit rl, saved;
	char *path, *got, *dpath;
	size_t len;
	const char *want;

	signal(SIGXFSZ, SIG_IGN);
	xasprintf(&path, "%s/drop.log", dir);
	console_file_open(&cf, path, 65536);
	console_file_write(&cf, "before\n", 7);
	getrlimit(RLIMIT_FSIZE, &saved);
	rl = saved;
	rl.rlim_cur = 7;		/* the file may not grow: write() fails with EFBIG */
	setrlimit(RLIMIT_FSIZE, &rl);
	console_file_write(&cf, "lost line\n", 10);
	console_file_write(&cf, "lost too\n", 9);
	setrlimit(RLIMIT_FSIZE, &saved);
	CHECK(cf.cf_dropped == 19);
	console_file_write(&cf, "after\n", 6);
	CHECK(cf.cf_pending == 0 && cf.cf_dropped == 19);
	got = console_file_read(path, 65536, &len);
	want = "before\n\n[airlock: 19 bytes dropped]\nafter\n";
	CHECK(len == strlen(want) && memcmp(got, want, len) == 0);
	if (len != strlen(want) || memcmp(got, want, len) != 0)
		fprintf(stderr, "got [%.*s]\n", (int)len, got);
	free(got);
	console_file_close(&cf);
	console_file_remove(path);
	/* A file that cannot be opened (its dir is missing) is retried, not given up. */
	xasprintf(&dpath, "%s/later/c.log", dir);
	console_file_open(&cf, dpath, 65536);
	console_file_write(&cf, "early\n", 6);
	CHECK(cf.cf_fd == -1 && cf.cf_dropped == 6);
	free(path);
	xasprintf(&path, "%s/later", dir);
	mkdir(path, 0700);
	console_file_write(&cf, "late\n", 5);
	got = console_file_read(dpath, 65536, &len);
	want = "\n[airlock: 6 bytes dropped]\nlate\n";
	CHECK(len == strlen(want) && memcmp(got, want, len) == 0);
	free(got);
	console_file_close(&cf);
	console_file_remove(dpath);
	rmdir(path);
	free(dpath);
	free(path);
}

struct rec {
	int		 lines;
	size_t		 longest;
	int		 saw_nul;
	char		 last[64];
	struct vm_console *free_on;	/* free this console at the line "free me" */
	int		 after_free;
};

static void
rec_line(const char *line, size_t len, void *arg)
{
	struct rec *r = arg;

	if (r->free_on == NULL && r->after_free == 1) {
		r->after_free = 2;	/* called again after the free: a bug */
		return;
	}
	r->lines++;
	if (len > r->longest)
		r->longest = len;
	if (len == 3 && memcmp(line, "a\0b", 3) == 0)
		r->saw_nul = 1;
	snprintf(r->last, sizeof(r->last), "%.*s", (int)(len < 63 ? len : 63), line);
	if (r->free_on != NULL && strcmp(line, "free me") == 0) {
		vm_console_free(r->free_on);
		r->free_on = NULL;
		r->after_free = 1;
	}
}

static void
loop_until_read(struct event_base *base, struct vm_console *co, uint64_t want)
{
	int i;

	/* Blocking passes: returns at once when no event is left (hung up). */
	for (i = 0; i < 1000000 && vm_console_bytes(co) < want; i++)
		if (event_base_loop(base, EVLOOP_ONCE) == 1)
			break;
}

/* Lines for events: NULs kept, CR LF stripped, long lines split; tail; drain. */
static void
test_reader_lines(void)
{
	struct event_base *base = event_base_new();
	struct rec r = { 0 };
	struct vm_console *co;
	char *path, *tail, big[10000];
	size_t sent = 9 + sizeof(big) + 10;
	int sv[2], i;

	xasprintf(&path, "%s/lines.log", dir);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	co = vm_console_new(base, sv[0], path, 65536, rec_line, &r);
	CHECK(write(sv[1], "one\r\na\0b\n", 9) == 9);
	memset(big, 'L', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	CHECK(write(sv[1], big, sizeof(big)) == (ssize_t)sizeof(big));
	for (i = 0; i < 100; i++) {
		char l[32];
		int n = snprintf(l, sizeof(l), "tail %d\n", i);
		CHECK(write(sv[1], l, (size_t)n) == n);
		sent += (size_t)n;
	}
	CHECK(write(sv[1], "no newline", 10) == 10);
	loop_until_read(base, co, sent);
	CHECK(r.saw_nul);
	CHECK(r.longest == VM_CONSOLE_LINE_MAX);	/* 9999 bytes: 4096 + 4096 + 1807 */
	CHECK(r.lines == 2 + 3 + 100);
	CHECK_STR(r.last, "tail 99");
	/* The VMM is gone: the partial last line still comes out. */
	close(sv[1]);
	CHECK(vm_console_drain(co) == 0);
	CHECK_STR(r.last, "no newline");
	tail = vm_console_tail(co);
	CHECK(strncmp(tail, "tail 61\n", 8) == 0);	/* the last 40 lines */
	CHECK(strstr(tail, "tail 99\nno newline") != NULL);
	free(tail);
	vm_console_free(co);
	console_file_remove(path);
	free(path);
	event_base_free(base);
}

/* vm_console_free from inside the line callback: no further calls, no use after free (ASan). */
static void
test_reader_free_in_callback(void)
{
	struct event_base *base = event_base_new();
	struct rec r = { 0 };
	char *path;
	int sv[2];

	xasprintf(&path, "%s/free.log", dir);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	r.free_on = vm_console_new(base, sv[0], path, 65536, rec_line, &r);
	CHECK(write(sv[1], "x\nfree me\nnever seen\nnor this\n", 30) == 30);
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);	/* runs the deferred release */
	CHECK(r.lines == 2 && r.after_free == 1);
	/* The console's socket is closed: the writer sees the peer gone. */
	CHECK(write(sv[1], "x", 1) == -1 && errno == EPIPE);
	close(sv[1]);
	console_file_remove(path);
	free(path);
	event_base_free(base);
}

/*
 * A guest that writes faster than we read never makes one callback do more
 * than VM_CONSOLE_BUDGET: the loop serves everyone else in between. Two
 * consoles with a full socket each both move in one loop pass.
 */
static void
test_reader_budget(void)
{
	struct event_base *base = event_base_new();
	struct vm_console *co[2];
	char *path[2], chunk[65536];
	size_t queued[2] = { 0, 0 };
	int sv[2][2], i, sz = 4 << 20;
	ssize_t n;

	memset(chunk, 'y', sizeof(chunk));
	for (i = 0; i < 65536; i += 2)
		chunk[i + 1] = '\n';
	for (i = 0; i < 2; i++) {
		xasprintf(&path[i], "%s/budget%d.log", dir, i);
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv[i]) == 0);
		setsockopt(sv[i][1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		while ((n = write(sv[i][1], chunk, sizeof(chunk))) > 0)
			queued[i] += (size_t)n;
		co[i] = vm_console_new(base, sv[i][0], path[i], 1 << 20, NULL, NULL);
	}
	CHECK(queued[0] > 2 * VM_CONSOLE_BUDGET && queued[1] > 2 * VM_CONSOLE_BUDGET);
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	for (i = 0; i < 2; i++)
		CHECK(vm_console_bytes(co[i]) > 0 && vm_console_bytes(co[i]) <= VM_CONSOLE_BUDGET);
	/* Level-triggered: the rest arrives without any new write. */
	for (i = 0; i < 2; i++) {
		loop_until_read(base, co[i], queued[i]);
		CHECK(vm_console_bytes(co[i]) == queued[i]);
	}
	fprintf(stderr, "   %zu + %zu bytes queued, one pass read at most %d of each\n", queued[0],
	    queued[1], VM_CONSOLE_BUDGET);
	for (i = 0; i < 2; i++) {
		vm_console_free(co[i]);
		close(sv[i][1]);
		console_file_remove(path[i]);
		free(path[i]);
	}
	event_base_free(base);
}

/* How fast the reader is against the worst case for lines: "y\n" (yes > /dev/console). */
static void
test_reader_throughput(void)
{
	struct event_base *base = event_base_new();
	struct vm_console *co;
	struct rec r = { 0 };
	struct timespec t0, t1;
	size_t total = 32 << 20;
	char *path, chunk[65536];
	int sv[2], status, i;
	pid_t pid;
	double s;

	memset(chunk, 'y', sizeof(chunk));
	for (i = 0; i < 65536; i += 2)
		chunk[i + 1] = '\n';
	xasprintf(&path, "%s/tp.log", dir);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	if ((pid = fork()) == 0) {
		size_t done = 0;
		close(sv[0]);
		while (done < total) {
			ssize_t n = write(sv[1], chunk, sizeof(chunk));
			if (n <= 0)
				_exit(1);
			done += (size_t)n;
		}
		_exit(0);
	}
	close(sv[1]);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	co = vm_console_new(base, sv[0], path, 1 << 20, rec_line, &r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	loop_until_read(base, co, total);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK(vm_console_bytes(co) == total && r.lines == (int)(total / 2));
	fprintf(stderr, "   reader: %zu MiB of \"y\\n\" in %.2f s: %.1f MiB/s, %.1f M lines/s\n",
	    total >> 20, s, (double)(total >> 20) / s, (double)r.lines / s / 1e6);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	vm_console_free(co);
	console_file_remove(path);
	free(path);
	event_base_free(base);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL)
		return 1;
	T_RUN(test_escape);
	T_RUN(test_file_cap);
	T_RUN(test_file_drop);
	T_RUN(test_reader_lines);
	T_RUN(test_reader_free_in_callback);
	T_RUN(test_reader_budget);
	T_RUN(test_reader_throughput);
	rmdir(dir);
	return t_done();
}
