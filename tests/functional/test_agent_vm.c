/*
 * The guest agent in a real microVM (TCG here): the base template boots
 * with the agent channel on a unix socket, airlock-agentctl forwards local
 * sockets through it, and the test drives the envd API and an exposed
 * port: the agent is PID 1 and survives `kill -9 1`, `echo hi` runs, exit
 * codes come back, a file round-trips, 20 execs complete beside a 100 MB
 * upload, python3 -m http.server is reachable through a stream, a host
 * reconnect resets and resumes the channel, and poweroff ends QEMU.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include <jansson.h>

#include "guest/agent/agent_console.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/template.h"
#include "vm/accel.h"
#include "vm/vm_boot.h"
#include "agent_harness.h"
#include "../unit/t.h"

#define BOOT_TIMEOUT_MS	180000
#define BIG_LEN		(100u * 1024 * 1024)
#define N_EXEC		20
/*
 * Liveness waits (the agent re-executing, the channel resetting, python3
 * starting in the guest) are bounded only so a broken build fails rather
 * than hangs: CI machines run this under TCG beside other suites, at half
 * this machine's speed or less, so the bound is minutes, and the time each
 * took is printed, not asserted.
 */
#define WAIT_TICK_US	100000
#define WAIT_TICKS	1200

static const char *ctl_bin;
static char *workdir, *chan_sock, *api;
static pid_t qemu_pid, fwd_pid;

static char *http_sock, *closed_sock;

/* One agentctl for all forwards: QEMU's channel socket takes one client. */
static pid_t
forward(void)
{
	char *a, *h, *c, *log, *argv[11];
	pid_t pid;

	xasprintf(&a, "unix:%s=49983", api);
	xasprintf(&h, "unix:%s=8000", http_sock);
	xasprintf(&c, "unix:%s=9", closed_sock);
	xasprintf(&log, "%s/fwd.log", workdir);
	argv[0] = (char *)ctl_bin; argv[1] = "-s"; argv[2] = chan_sock; argv[3] = "forward";
	argv[4] = "-L"; argv[5] = a; argv[6] = "-L"; argv[7] = h; argv[8] = "-L"; argv[9] = c;
	argv[10] = NULL;
	pid = ah_spawn(argv, "forwarding ready", log);
	free(a);
	free(h);
	free(c);
	free(log);
	return pid;
}

static void
test_pid1(void)
{
	struct ah_run run;
	struct hresp r;
	int i;

	CHECK(ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
	    "\"readlink /proc/1/exe; id -un; kill -9 1; echo still here\"]}}",
	    "Authorization: Basic cm9vdDo=\r\n", &run) == 0);
	CHECK_STR(run.out, "/usr/local/bin/airlock-agent\nroot\nstill here\n");
	ah_run_free(&run);
	CHECK(ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	/*
	 * A crash of the agent (here a SIGSEGV sent by root) must not take the
	 * VM down: it re-executes itself as PID 1 and the host reconnects.
	 */
	ah_exec(api, "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"kill -SEGV 1\"]}}",
	    "Authorization: Basic cm9vdDo=\r\n", &run);
	ah_run_free(&run);
	for (i = 0; i < WAIT_TICKS; i++) {
		if (ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204) {
			ah_resp_free(&r);
			break;
		}
		ah_resp_free(&r);
		usleep(WAIT_TICK_US);
	}
	fprintf(stderr, "   agent back after SIGSEGV in %.1f s\n", i * WAIT_TICK_US / 1e6);
	CHECK(i < WAIT_TICKS);
	CHECK(ah_alive(qemu_pid));
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"readlink\",\"args\":[\"/proc/1/exe\"]}}",
	    "Authorization: Basic cm9vdDo=\r\n", &run) == 0);
	CHECK_STR(run.out, "/usr/local/bin/airlock-agent\n");
	ah_run_free(&run);
}

/* One Start as the JS SDK sends it; returns the run (caller frees). */
static void
start_js(const char *cmd, const char *extra, const char *headers, struct ah_run *run)
{
	char *req, hdrs[512];

	xasprintf(&req, "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"%s\"]%s},"
	    "\"stdin\":false}", cmd, extra != NULL ? extra : "");
	snprintf(hdrs, sizeof(hdrs), "Connect-Timeout-Ms: 60000\r\nKeepalive-Ping-Interval: 50\r\n"
	    "E2b-Sandbox-Id: 3469aff0e28fca1e4783\r\nE2b-Sandbox-Port: 49983\r\n"
	    "User-Agent: e2b-js-sdk/2.20.1\r\n%s", headers != NULL ? headers : "");
	CHECK(ah_exec(api, req, hdrs, run) == 0);
	free(req);
}

/*
 * The envd part of ../shared/spec/e2b-observed-requests.txt, byte for byte
 * where it matters (bodies, content types, chunked uploads), with the
 * answers the spec requires.
 */
static void
test_e2b_replay(void)
{
	static const char mp1[] = "------formdata-undici-075540592812\r\nContent-Disposition: "
	    "form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\nContent-Type: "
	    "application/octet-stream\r\n\r\nhello file\r\n------formdata-undici-075540592812--\r\n";
	static const char mp2[] = "------formdata-undici-013289807675\r\nContent-Disposition: "
	    "form-data; name=\"file\"; filename=\"/home/user/m1.txt\"\r\nContent-Type: "
	    "application/octet-stream\r\n\r\none\r\n------formdata-undici-013289807675\r\n"
	    "Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/m2.txt\"\r\n"
	    "Content-Type: application/octet-stream\r\n\r\ntwo\r\n"
	    "------formdata-undici-013289807675--\r\n";
	struct ah_run run;
	struct hresp r;
	char *req;
	int fd, pid;

	start_js("echo hi; echo err 1>&2", NULL, NULL, &run);
	CHECK(run.start_first && run.end_stream);
	CHECK_STR(run.out, "hi\n");
	CHECK_STR(run.err, "err\n");
	CHECK(run.ended && run.exit_code == 0);
	ah_run_free(&run);
	start_js("exit 3", NULL, NULL, &run);
	CHECK(run.ended && run.exit_code == 3 && run.end_stream);
	CHECK_STR(run.error, "exit status 3");
	ah_run_free(&run);
	/* One connection for all /files requests, as undici's connections:1 agent. */
	fd = ah_unix_connect(api);
	CHECK(ah_send_chunked(fd, "/files?path=%2Fhome%2Fuser%2Fa.txt",
	    "multipart/form-data; boundary=----formdata-undici-075540592812", mp1,
	    sizeof(mp1) - 1) == 0);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 200);
	CHECK_STR(r.body, "[{\"name\":\"a.txt\",\"type\":\"file\",\"path\":\"/home/user/a.txt\"}]");
	ah_resp_free(&r);
	CHECK(ah_send_chunked(fd, "/files?path=rel%2Fb.txt", "application/octet-stream", "octet", 5) == 0);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 200);
	CHECK_STR(r.body, "[{\"name\":\"b.txt\",\"type\":\"file\",\"path\":\"/home/user/rel/b.txt\"}]");
	ah_resp_free(&r);
	CHECK(ah_send_chunked(fd, "/files", "multipart/form-data; boundary=----formdata-undici-013289807675",
	    mp2, sizeof(mp2) - 1) == 0);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 200);
	CHECK_STR(r.body, "[{\"name\":\"m1.txt\",\"type\":\"file\",\"path\":\"/home/user/m1.txt\"},"
	    "{\"name\":\"m2.txt\",\"type\":\"file\",\"path\":\"/home/user/m2.txt\"}]");
	ah_resp_free(&r);
	CHECK(ah_send(fd, "GET", "/files?path=%2Fhome%2Fuser%2Fa.txt", NULL, NULL, 0) == 0);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 200 && r.len == 10);
	ah_resp_free(&r);
	close(fd);
	CHECK(ah_rpc(api, "filesystem.Filesystem/ListDir", "{\"path\":\"/home/user\",\"depth\":1}", NULL,
	    &r) == 200);
	CHECK(strstr(r.body, "\"path\":\"/home/user/m2.txt\"") != NULL);
	CHECK(strstr(r.body, "\"path\":\"/home/user/rel\"") != NULL);
	CHECK(strstr(r.body, "/home/user/rel/b.txt") == NULL);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\"path\":\"/home/user/nope\"}", NULL, &r) == 404);
	CHECK(strstr(r.body, "\"code\":\"not_found\"") != NULL);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"/home/user/dir\"}", NULL, &r) == 200);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"/home/user/dir\"}", NULL, &r) == 409);
	CHECK(strstr(r.body, "\"code\":\"already_exists\"") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/files?path=%2Fhome%2Fuser%2Fmissing", NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 404 && strstr(r.body, "\"code\":404") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	/* Background cat with stdin: List, SendInput, CloseStdin. */
	{
		char *env, *chunk;
		size_t len;
		struct hresp h;
		json_t *j;
		ssize_t n;

		env = ah_envelope("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"cat\"]},"
		    "\"stdin\":true}", &len);
		fd = ah_unix_connect(api);
		CHECK(ah_send(fd, "POST", "/process.Process/Start",
		    "Content-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\n", env,
		    len) == 0);
		free(env);
		CHECK(ah_read_head(fd, &h) == 0 && h.status == 200);
		ah_resp_free(&h);
		CHECK((n = ah_read_chunk(fd, &chunk)) > 5);
		j = json_loadb(chunk + 5, (size_t)n - 5, 0, NULL);
		pid = (int)json_integer_value(json_object_get(json_object_get(json_object_get(j,
		    "event"), "start"), "pid"));
		json_decref(j);
		free(chunk);
		CHECK(ah_rpc(api, "process.Process/List", "{}", NULL, &r) == 200);
		xasprintf(&req, "\"pid\":%d", pid);
		CHECK(strstr(r.body, req) != NULL && strstr(r.body, "\"config\":{") != NULL);
		free(req);
		ah_resp_free(&r);
		xasprintf(&req, "{\"process\":{\"pid\":%d},\"input\":{\"stdin\":\"YWJjCg==\"}}", pid);
		CHECK(ah_rpc(api, "process.Process/SendInput", req, NULL, &r) == 200);
		CHECK_STR(r.body, "{}");
		ah_resp_free(&r);
		free(req);
		xasprintf(&req, "{\"process\":{\"pid\":%d}}", pid);
		CHECK(ah_rpc(api, "process.Process/CloseStdin", req, NULL, &r) == 200);
		ah_resp_free(&r);
		free(req);
		CHECK(ah_read_response_rest(fd, &run) == 0);
		CHECK_STR(run.out, "abc\n");
		CHECK(run.ended && run.exit_code == 0 && run.end_stream);
		ah_run_free(&run);
		close(fd);
	}
	/* As root, envs and cwd; SIGKILL; then a pid that does not exist. */
	{
		char *env, *chunk;
		size_t len;
		struct hresp h;
		json_t *j;
		ssize_t n;

		env = ah_envelope("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\","
		    "\"sleep 30\"],\"envs\":{\"A\":\"1\"},\"cwd\":\"/tmp\"},\"stdin\":false}", &len);
		fd = ah_unix_connect(api);
		CHECK(ah_send(fd, "POST", "/process.Process/Start",
		    "Authorization: Basic cm9vdDo=\r\nContent-Type: application/connect+json\r\n", env,
		    len) == 0);
		free(env);
		CHECK(ah_read_head(fd, &h) == 0 && h.status == 200);
		ah_resp_free(&h);
		CHECK((n = ah_read_chunk(fd, &chunk)) > 5);
		j = json_loadb(chunk + 5, (size_t)n - 5, 0, NULL);
		pid = (int)json_integer_value(json_object_get(json_object_get(json_object_get(j,
		    "event"), "start"), "pid"));
		json_decref(j);
		free(chunk);
		xasprintf(&req, "{\"process\":{\"pid\":%d},\"signal\":\"SIGNAL_SIGKILL\"}", pid);
		CHECK(ah_rpc(api, "process.Process/SendSignal", req, NULL, &r) == 200);
		ah_resp_free(&r);
		free(req);
		CHECK(ah_read_response_rest(fd, &run) == 0);
		CHECK(run.ended && run.exit_code == -1 && !run.exited && run.end_stream);
		CHECK_STR(run.status, "signal: killed");
		ah_run_free(&run);
		close(fd);
	}
	CHECK(ah_rpc(api, "process.Process/SendSignal",
	    "{\"process\":{\"pid\":999999},\"signal\":\"SIGNAL_SIGKILL\"}", NULL, &r) == 404);
	CHECK(strstr(r.body, "\"code\":\"not_found\"") != NULL);
	ah_resp_free(&r);
}

static void
test_exec(void)
{
	struct ah_run run;

	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"]},"
	    "\"stdin\":false}", "Connect-Timeout-Ms: 60000\r\nKeepalive-Ping-Interval: 50\r\n",
	    &run) == 0);
	CHECK(run.start_first && run.pid > 1);
	CHECK_STR(run.out, "hi\n");
	CHECK(run.ended && run.exit_code == 0 && run.end_stream);
	ah_run_free(&run);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\","
	    "\"echo $USER $HOME $LANG; exit 3\"]}}", NULL, &run) == 0);
	CHECK_STR(run.out, "user /home/user C.UTF-8\n");	/* template env reaches commands */
	CHECK(run.ended && run.exit_code == 3);
	CHECK_STR(run.error, "exit status 3");
	ah_run_free(&run);
	/* A PTY session in the guest (devpts mounted by the agent, static glibc's openpt). */
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-c\",\"tty; stty size\"],"
	    "\"envs\":{\"TERM\":\"xterm-256color\"}},\"pty\":{\"size\":{\"cols\":120,\"rows\":40}}}",
	    NULL, &run) == 0);
	CHECK(strstr(run.pty, "/dev/pts/") != NULL);
	CHECK(strstr(run.pty, "40 120") != NULL);
	CHECK(run.ended && run.exit_code == 0);
	ah_run_free(&run);
}

static void
test_files(void)
{
	const char *body = "--b\r\nContent-Disposition: form-data; name=\"file\"; "
	    "filename=\"/home/user/a.txt\"\r\n\r\nhello file\r\n--b--\r\n";
	struct hresp r;
	struct ah_run run;

	CHECK(ah_request(api, "POST", "/files?path=%2Fhome%2Fuser%2Fa.txt",
	    "Content-Type: multipart/form-data; boundary=b\r\n", body, strlen(body), &r) == 0);
	CHECK(r.status == 200);
	CHECK_STR(r.body, "[{\"name\":\"a.txt\",\"type\":\"file\",\"path\":\"/home/user/a.txt\"}]");
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/files?path=%2Fhome%2Fuser%2Fa.txt", NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 200 && r.len == 10 && memcmp(r.body, "hello file", 10) == 0);
	ah_resp_free(&r);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"stat\",\"args\":[\"-c\",\"%U %s\",\"a.txt\"]}}",
	    NULL, &run) == 0);
	CHECK_STR(run.out, "user 10\n");
	ah_run_free(&run);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\"path\":\"/home/user/nope\"}", NULL,
	    &r) == 404);
	ah_resp_free(&r);
}

static void *
upload_job(void *arg)
{
	struct ah_job *j = arg;
	struct hresp r;
	char *buf = malloc(BIG_LEN);
	double t0 = ah_now_ms();
	int fd;

	for (size_t i = 0; i < BIG_LEN; i++)
		buf[i] = (char)(i * 13 + i / 65536);
	fd = ah_unix_connect(api);
	j->ok = ah_send(fd, "POST", "/files?path=%2Ftmp%2Fbig.bin",
	    "Content-Type: application/octet-stream\r\n", buf, BIG_LEN) == 0 &&
	    ah_read_response(fd, &r) == 0 && r.status == 200;
	j->ms = ah_now_ms() - t0;
	ah_resp_free(&r);
	close(fd);
	free(buf);
	return NULL;
}

static void
test_concurrent(void)
{
	struct ah_job up, ex[N_EXEC];
	struct ah_run run;
	double sum, maxms, before_up = 0;
	int ok, done_before = 0;

	/* Baseline: one exec with the channel idle. */
	before_up = ah_now_ms();
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"true\"}}", NULL, &run) == 0 && run.ended);
	before_up = ah_now_ms() - before_up;
	ah_run_free(&run);
	/* Baseline: the same 20 execs with no upload, to tell CPU from channel. */
	{
		double bsum, bmax, t0 = ah_now_ms();

		CHECK(ah_exec_jobs(api, ex, N_EXEC, &bsum, &bmax) == N_EXEC);
		fprintf(stderr, "   20 concurrent execs, no upload: mean %.1f ms, all done in %.1f ms\n",
		    bsum / N_EXEC, ah_now_ms() - t0);
	}
	memset(&up, 0, sizeof(up));
	pthread_create(&up.t, NULL, upload_job, &up);
	usleep(500000);
	ok = ah_exec_jobs(api, ex, N_EXEC, &sum, &maxms);
	/* Did they finish while the upload was still going? Reported, not asserted. */
	done_before = pthread_tryjoin_np(up.t, NULL) != 0;
	if (done_before)
		pthread_join(up.t, NULL);
	CHECK(ok == N_EXEC);
	CHECK(up.ok);
	fprintf(stderr, "   idle exec %.1f ms; %d/%d concurrent execs ok (mean %.1f, max %.1f ms)%s;"
	    " 100 MB upload %.0f ms (%.1f MB/s)\n", before_up, ok, N_EXEC, sum / N_EXEC, maxms,
	    done_before ? ", all before the upload ended" : "", up.ms, 100.0 * 1000 / up.ms);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"stat\",\"args\":[\"-c\",\"%s\",\"/tmp/big.bin\"]}}",
	    NULL, &run) == 0);
	CHECK_STR(run.out, "104857600\n");
	ah_run_free(&run);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"rm\",\"args\":[\"/tmp/big.bin\"]}}", NULL, &run) == 0);
	ah_run_free(&run);
}

static void
test_exposed_port(void)
{
	struct hresp r;
	struct ah_run run;
	int i, fd, served = 0;
	char buf[16];

	/*
	 * A background server, started like the SDK's background commands.
	 * Not `python3 -m http.server`: under TCG its imports take over a
	 * minute; this one needs only the socket module.
	 */
	{
		static const char srv[] =
		    "import socket\n"
		    "s = socket.socket()\n"
		    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
		    "s.bind(('127.0.0.1', 8000))\n"
		    "s.listen(16)\n"
		    "while True:\n"
		    "    c, _ = s.accept()\n"
		    "    c.recv(65536)\n"
		    "    body = open('/home/user/a.txt', 'rb').read()\n"
		    "    c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(body) + body)\n"
		    "    c.close()\n";
		struct hresp h;
		char *env;
		size_t len;
		int sfd;

		CHECK(ah_request(api, "POST", "/files?path=srv.py", "Content-Type: application/octet-stream\r\n",
		    srv, sizeof(srv) - 1, &h) == 0 && h.status == 200);
		ah_resp_free(&h);
		env = ah_envelope("{\"process\":{\"cmd\":\"python3\",\"args\":[\"srv.py\"]}}", &len);
		sfd = ah_unix_connect(api);
		CHECK(ah_send(sfd, "POST", "/process.Process/Start",
		    "Content-Type: application/connect+json\r\n", env, len) == 0);
		CHECK(ah_read_head(sfd, &h) == 0 && h.status == 200);
		ah_resp_free(&h);
		free(env);
		close(sfd);	/* disconnect: the server keeps running */
	}
	for (i = 0; i < 3 * WAIT_TICKS && !served; i++) {
		if (ah_request(http_sock, "GET", "/a.txt", NULL, NULL, 0, &r) == 0 && r.status == 200)
			served = r.len == 10 && memcmp(r.body, "hello file", 10) == 0;
		ah_resp_free(&r);
		if (!served)
			usleep(WAIT_TICK_US);	/* python3 starting under TCG */
	}
	fprintf(stderr, "   guest server answered after %.1f s\n", i * WAIT_TICK_US / 1e6);
	CHECK(served);
	if (!served) {
		CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
		    "\"ps -ef | grep -v '\\\\['; ss -ltn\"]}}", "Authorization: Basic cm9vdDo=\r\n", &run) == 0);
		fprintf(stderr, "%s%s", run.out, run.err);
		ah_run_free(&run);
	}
	/* Nothing listens on port 9: the stream is refused, the local socket closes. */
	fd = ah_unix_connect(closed_sock);
	CHECK(fd != -1 && read(fd, buf, sizeof(buf)) <= 0);
	close(fd);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"pkill\",\"args\":[\"-f\",\"srv.py\"]}}",
	    "Authorization: Basic cm9vdDo=\r\n", &run) == 0);
	ah_run_free(&run);
}

/* The host goes away and comes back: the channel resets and serves again. */
static void
test_reconnect(void)
{
	struct hresp r;
	int i;

	ah_kill(fwd_pid);
	fwd_pid = forward();
	CHECK(fwd_pid > 0);
	for (i = 0; i < WAIT_TICKS; i++) {
		if (ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204) {
			ah_resp_free(&r);
			break;
		}
		ah_resp_free(&r);
		usleep(WAIT_TICK_US);
	}
	fprintf(stderr, "   channel serving again after %.1f s\n", i * WAIT_TICK_US / 1e6);
	CHECK(i < WAIT_TICKS);
}

static void
test_poweroff(void)
{
	struct hresp r;
	int status;

	CHECK(ah_request(api, "POST", "/airlock/poweroff", NULL, NULL, 0, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	CHECK(vm_boot_wait_exit(qemu_pid, 60000, &status) == 0);
	qemu_pid = -1;
}

int
main(int argc, char **argv)
{
	struct template_paths tp;
	struct accel_info ai;
	struct vm_spec s;
	char *rootfs, *console, *cause = NULL;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: test_agent_vm AGENTCTL_BIN\n");
		return 2;
	}
	ctl_bin = argv[1];
	signal(SIGPIPE, SIG_IGN);
	if (template_paths("base", &tp, &cause) == -1 ||
	    accel_detect(VM_ACCEL_AUTO, &ai, &cause) == -1) {
		fprintf(stderr, "test_agent_vm: %s\n", cause);
		return 1;
	}
	workdir = paths_data("run/tav-%ld", (long)getpid());
	if (mkdir_p(workdir, 0700, &cause) == -1) {
		fprintf(stderr, "test_agent_vm: %s\n", cause);
		return 1;
	}
	xasprintf(&rootfs, "%s/rootfs.ext4", workdir);
	xasprintf(&console, "%s/console.log", workdir);
	xasprintf(&chan_sock, "%s/agent.sock", workdir);
	xasprintf(&api, "%s/api.sock", workdir);
	xasprintf(&http_sock, "%s/http.sock", workdir);
	xasprintf(&closed_sock, "%s/closed.sock", workdir);
	if (reflink_copy(tp.rootfs, rootfs, &cause) == -1) {
		fprintf(stderr, "test_agent_vm: %s\n", cause);
		return 1;
	}
	memset(&s, 0, sizeof(s));
	s.accel = ai.accel;
	s.tsc_khz = ai.tsc_khz;
	s.vcpus = 2;
	s.memory_mb = 256;
	s.kernel = tp.kernel;
	s.initrd = tp.initrd;
	s.rootfs = rootfs;
	s.console_log = console;
	s.agent_socket = chan_sock;
	s.no_reboot = 1;
	if (vm_boot_start(&s, &qemu_pid, &cause) == -1 ||
	    vm_boot_wait_line(qemu_pid, console, AGENT_READY_LINE, BOOT_TIMEOUT_MS, &cause) == -1) {
		fprintf(stderr, "test_agent_vm: boot: %s\n", cause);
		if (qemu_pid > 0)
			vm_boot_kill(qemu_pid);
		return 1;
	}
	fwd_pid = forward();
	if (fwd_pid <= 0) {
		vm_boot_kill(qemu_pid);
		fprintf(stderr, "test_agent_vm: no forwarder (console in %s)\n", console);
		return 1;
	}
	T_RUN(test_pid1);
	T_RUN(test_e2b_replay);
	T_RUN(test_exec);
	T_RUN(test_files);
	T_RUN(test_concurrent);
	T_RUN(test_exposed_port);
	T_RUN(test_reconnect);
	T_RUN(test_poweroff);
	ah_kill(fwd_pid);
	if (qemu_pid > 0)
		vm_boot_kill(qemu_pid);
	rc = t_done();
	if (rc == 0)
		remove_tree(workdir, NULL);
	else
		fprintf(stderr, "console and logs kept in %s\n", workdir);
	template_paths_free(&tp);
	free(rootfs);
	free(console);
	free(chan_sock);
	free(api);
	free(http_sock);
	free(closed_sock);
	free(workdir);
	return rc;
}
