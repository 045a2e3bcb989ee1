/* Gateway policy parsing and matching, denied address ranges, control messages. */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/util.h"
#include "gateway/shared/gw_addr.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/shared/gw_ctl.h"
#include "gateway/shared/gw_policy.h"
#include "t.h"

static struct gw_policy *
parse(const char *text, char **cause)
{
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);
	struct gw_policy *p;

	if (j == NULL) {
		fprintf(stderr, "bad test json: %s\n", err.text);
		exit(1);
	}
	p = gw_policy_parse(j, cause);
	json_decref(j);
	return p;
}

/* A small ring so several addresses can be live in one expression. */
static struct sockaddr *
SA(const char *text)
{
	static struct sockaddr_storage ring[8];
	static int next;
	struct sockaddr_storage ss = { 0 };

	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else {
		fprintf(stderr, "bad test address %s\n", text);
		exit(1);
	}
	next = (next + 1) % 8;
	ring[next] = ss;
	return (struct sockaddr *)&ring[next];
}

static void
test_names(void)
{
	char out[256];

	CHECK(gw_name_normalize("API.Example.COM.", out, sizeof out) == 0);
	CHECK_STR(out, "api.example.com");
	CHECK(gw_name_normalize("a..b", out, sizeof out) == -1);
	CHECK(gw_name_normalize(".", out, sizeof out) == -1);
	CHECK(gw_name_normalize("a b", out, sizeof out) == -1);
	CHECK(gw_name_normalize("evil.com\\000.allowed.com", out, sizeof out) == -1);
	CHECK(gw_host_match("*.example.com", "a.b.example.com"));
	CHECK(!gw_host_match("*.example.com", "example.com"));
	CHECK(!gw_host_match("*.example.com", "badexample.com"));
	CHECK(gw_host_match("example.com", "example.com"));
	CHECK(!gw_host_match("example.com", "www.example.com"));
}

/* policy.headers refused, and the field named. */
#define HDR_ERR(headers, want) do {						\
	char *c_ = NULL;							\
	CHECK(parse("{\"mode\":\"allowlist\",\"headers\":" headers "}", &c_) == NULL);	\
	CHECK_CAUSE(c_, want);							\
	free(c_);								\
} while (0)

static void
test_header_errors(void)
{
	char *cause = NULL;

	HDR_ERR("{}", "policy.headers: must be an array");
	HDR_ERR("[7]", "policy.headers[0]: must be an object");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"X\":\"v\"},\"when\":1}]",
	    "policy.headers[0].when: unknown field");
	HDR_ERR("[{\"set\":{\"X\":\"v\"}}]", "policy.headers[0].host: must be");
	HDR_ERR("[{\"host\":\"*.com\",\"set\":{\"X\":\"v\"}}]", "policy.headers[0].host");
	HDR_ERR("[{\"host\":\"a b\",\"set\":{\"X\":\"v\"}}]", "policy.headers[0].host");
	HDR_ERR("[{\"host\":\"a.com\"}]", "policy.headers[0].set: must be an object");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{}}]", "policy.headers[0].set: must be");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"X Y\":\"v\"}}]",
	    "policy.headers[0].set.X Y: not a header name");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"\":\"v\"}}]", "policy.headers[0].set.: not a");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"X\":7}}]", "policy.headers[0].set.X: must be a");
	/* Header injection through a value: refused, and the cause carries no value. */
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"X\":\"v\\r\\nEvil: 1\"}}]",
	    "policy.headers[0].set.X: must be a string");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"Content-Length\":\"0\"}}]",
	    "policy.headers[0].set.Content-Length: frames or routes");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"host\":\"b.com\"}}]",
	    "policy.headers[0].set.host: frames");
	HDR_ERR("[{\"host\":\"a.com\",\"set\":{\"Transfer-Encoding\":\"chunked\"}}]",
	    "set.Transfer-Encoding: frames");
	CHECK(parse("{\"mode\":\"none\",\"headers\":[{\"host\":\"a.com\",\"set\":"
	    "{\"X\":\"v\"}}]}", &cause) == NULL);
	CHECK_CAUSE(cause, "policy.headers: not allowed with mode none");
	free(cause), cause = NULL;
	/* A secret value never appears in a cause. */
	CHECK(parse("{\"mode\":\"allowlist\",\"headers\":[{\"host\":\"a.com\",\"set\":"
	    "{\"X\":\"sekrit\\u0001\"}}]}", &cause) == NULL);
	CHECK(cause != NULL && strstr(cause, "sekrit") == NULL);
	free(cause);
}

static void
test_headers(void)
{
	struct gw_policy *p;
	char *cause = NULL;

	p = parse("{\"mode\":\"full\",\"headers\":[{\"host\":\"API.Example.com.\",\"set\":"
	    "{\"X-A\":\"1\",\"Authorization\":\"Bearer t\\tx\"}},{\"host\":\"*.example.org\","
	    "\"set\":{\"X-B\":\"\"}}]}", &cause);
	CHECK(p != NULL);
	if (p == NULL) {
		fprintf(stderr, "  cause: %s\n", cause);
		free(cause);
		return;
	}
	CHECK(p->nhdrsets == 2);
	CHECK_STR(p->hdrsets[0].host, "api.example.com");
	CHECK(p->hdrsets[0].n == 2);
	CHECK_STR(p->hdrsets[0].names[1], "Authorization");
	CHECK_STR(p->hdrsets[0].values[1], "Bearer t\tx");
	CHECK_STR(p->hdrsets[1].host, "*.example.org");
	/* A header set makes full mode terminate TLS for its host, and only for it. */
	CHECK(gw_policy_needs_intercept(p, "api.example.com"));
	CHECK(gw_policy_needs_intercept(p, "a.b.example.org"));
	CHECK(!gw_policy_needs_intercept(p, "example.org"));
	CHECK(!gw_policy_needs_intercept(p, "other.example.com"));
	gw_policy_unref(p);
}

static void
test_parse_errors(void)
{
	char *cause = NULL;

	CHECK(parse("{\"mode\":\"sometimes\"}", &cause) == NULL);
	CHECK_CAUSE(cause, "policy.mode");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"allow\":[\"10.0.0.0/8\"]}", &cause) == NULL);
	CHECK_CAUSE(cause, "needs a port");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"allow\":[\"x.com:99999\"]}", &cause) == NULL);
	CHECK_CAUSE(cause, "allow[0]");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"allow\":[\"*.com\"]}", &cause) == NULL);
	CHECK_CAUSE(cause, "wildcard");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"allow\":[{\"host\":\"a.com\",\"verbs\":[]}]}",
	    &cause) == NULL);
	CHECK_CAUSE(cause, "verbs: unknown field");
	free(cause), cause = NULL;
	/* A method is a token: not a phrase, not a 300-byte string. */
	CHECK(parse("{\"mode\":\"allowlist\",\"allow\":[{\"host\":\"a.com\",\"methods\":"
	    "[\"GET\",\"GET /x\"]}]}", &cause) == NULL);
	CHECK_CAUSE(cause, "methods[1]");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"allow\":[{\"host\":\"a.com\",\"methods\":"
	    "[\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"]}]}", &cause) == NULL);
	CHECK_CAUSE(cause, "HTTP method");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"credentials\":[{\"name\":\"T\",\"value\":\"a\\r\\nX: y\","
	    "\"hosts\":[\"a.com\"]}]}", &cause) == NULL);
	CHECK_CAUSE(cause, "CR/LF");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"credentials\":[{\"name\":\"T\",\"value\":\"v\","
	    "\"hosts\":[\"a.com\"],\"format\":\"no placeholder\"}]}", &cause) == NULL);
	CHECK_CAUSE(cause, "{value}");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"none\",\"allow\":[\"a.com\"]}", &cause) == NULL);
	CHECK_CAUSE(cause, "mode none");
	free(cause), cause = NULL;
	CHECK(parse("{\"mode\":\"allowlist\",\"internal\":[\"10.0.0.1/8\"]}", &cause) == NULL);
	free(cause), cause = NULL;
	test_header_errors();
	CHECK(parse("{\"mode\":\"allowlist\",\"extra\":1}", &cause) == NULL);
	CHECK_CAUSE(cause, "policy.extra: unknown field");
	free(cause);
}

static void
test_matching(void)
{
	char *cause = NULL;
	struct gw_policy *p;
	const struct gw_rule *r;

	p = parse("{\"mode\":\"allowlist\",\"allow\":[\"api.example.com\", \"*.cdn.example\","
	    "\"db.example.com:5432\", \"203.0.113.0/24:22\","
	    "{\"host\":\"ro.example.com\",\"methods\":[\"get\"],\"paths\":[\"/v1/*\"]}],"
	    "\"internal\":[\"10.1.2.0/24:5432\"],"
	    "\"credentials\":[{\"name\":\"GH\",\"value\":\"s3cr3t\",\"hosts\":[\"api.example.com\"]}],"
	    "\"rate\":{\"rps\":5}}", &cause);
	CHECK(p != NULL);
	if (p == NULL) {
		fprintf(stderr, "%s\n", cause);
		return;
	}
	CHECK(gw_policy_dns_allowed(p, "api.example.com"));
	CHECK(gw_policy_dns_allowed(p, "x.y.cdn.example"));
	CHECK(gw_policy_dns_allowed(p, "db.example.com"));
	CHECK(!gw_policy_dns_allowed(p, "evil.example.com"));
	CHECK(!gw_policy_dns_allowed(p, "cdn.example"));

	CHECK((r = gw_policy_http_rule(p, "api.example.com", 443)) != NULL &&
	    strcmp(r->text, "api.example.com") == 0);
	CHECK(gw_policy_http_rule(p, "api.example.com", 80) != NULL);
	CHECK(gw_policy_http_rule(p, "api.example.com", 8443) == NULL);
	CHECK(gw_policy_http_rule(p, "db.example.com", 443) == NULL);
	CHECK(gw_policy_http_rule(p, "other.example.com", 443) == NULL);

	CHECK((r = gw_policy_http_rule(p, "ro.example.com", 443)) != NULL);
	CHECK(r != NULL && gw_rule_request_allowed(r, "GET", "/v1/repos"));
	CHECK(r != NULL && gw_rule_request_allowed(r, "GET", "/v1"));
	CHECK(r != NULL && !gw_rule_request_allowed(r, "GET", "/v10"));
	CHECK(r != NULL && !gw_rule_request_allowed(r, "POST", "/v1/repos"));
	CHECK(r != NULL && !gw_rule_request_allowed(r, "GET", "/admin"));

	CHECK(gw_policy_l4_rule(p, "db.example.com", SA("198.51.100.7"), 5432) != NULL);
	CHECK(gw_policy_l4_rule(p, "db.example.com", SA("198.51.100.7"), 5433) == NULL);
	CHECK(gw_policy_l4_rule(p, NULL, SA("203.0.113.9"), 22) != NULL);
	CHECK(gw_policy_l4_rule(p, NULL, SA("203.0.114.9"), 22) == NULL);
	CHECK(gw_policy_l4_rule(p, "api.example.com", SA("198.51.100.7"), 8443) == NULL);

	CHECK(gw_policy_internal_allowed(p, SA("10.1.2.3"), 5432));
	CHECK(!gw_policy_internal_allowed(p, SA("10.1.2.3"), 22));
	CHECK(!gw_policy_internal_allowed(p, SA("10.1.3.3"), 5432));

	CHECK(gw_policy_credential(p, "GH") != NULL);
	CHECK(gw_policy_credential(p, "NOPE") == NULL);
	CHECK(gw_policy_needs_intercept(p, "api.example.com"));
	CHECK(!gw_policy_needs_intercept(p, "ro.example.com"));
	CHECK(p->rate.rps == 5);
	gw_policy_unref(p);

	p = parse("{\"mode\":\"full\"}", &cause);
	CHECK(p != NULL && gw_policy_http_rule(p, "anything.example", 443) != NULL);
	CHECK(p != NULL && gw_policy_l4_rule(p, NULL, SA("203.0.113.1"), 9999) != NULL);
	gw_policy_unref(p);
	p = parse("{\"mode\":\"none\"}", &cause);
	CHECK(p != NULL && !gw_policy_dns_allowed(p, "a.com"));
	CHECK(p != NULL && gw_policy_http_rule(p, "a.com", 443) == NULL);
	gw_policy_unref(p);
}

static void
test_denied(void)
{
	static const char *deny[] = {
		"127.0.0.1", "10.0.0.1", "10.0.0.2", "172.16.5.4", "192.168.1.1", "100.64.0.1",
		"169.254.169.254", "0.0.0.0", "224.0.0.1", "255.255.255.255", "198.18.0.1",
		"::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
		"2002:c0a8:0101::1", "::10.0.0.1",
	};
	static const char *allow[] = {
		"203.0.113.10", "198.51.100.53", "8.8.8.8", "1.1.1.1", "2606:4700::1111",
		"::ffff:8.8.8.8",
	};
	const char *reason;

	for (size_t i = 0; i < sizeof deny / sizeof deny[0]; i++) {
		int d = gw_addr_denied(NULL, SA(deny[i]), &reason);

		CHECK(d == 1);
		if (d != 1)
			fprintf(stderr, "  %s not denied\n", deny[i]);
	}
	for (size_t i = 0; i < sizeof allow / sizeof allow[0]; i++) {
		int d = gw_addr_denied(NULL, SA(allow[i]), &reason);

		CHECK(d == 0);
		if (d != 0)
			fprintf(stderr, "  %s denied (%s)\n", allow[i], reason);
	}
	CHECK(gw_addr_denied(NULL, SA("169.254.169.254"), &reason) == 1 &&
	    strcmp(reason, "link-local") == 0);
	{
		struct gw_addrset *host = gw_addrset_local(NULL);

		CHECK(host != NULL && gw_addrset_contains(host, SA("127.0.0.1")));
		gw_addrset_free(host);
	}
}

static void
test_ctl(void)
{
	int sv[2], fds[GW_CTL_MAX_FDS], pass[2];
	size_t nfds;
	json_t *in, *out = NULL;
	char *cause = NULL;

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
	CHECK(pipe(pass) == 0);
	in = json_pack("{s:s,s:s}", "op", "attach", "sandbox", "abc");
	CHECK(gw_ctl_send(sv[0], in, pass, 2, &cause) == 0);
	CHECK(gw_ctl_recv(sv[1], &out, fds, &nfds, &cause) == 1);
	CHECK(nfds == 2);
	CHECK(out != NULL && json_equal(in, out));
	CHECK(nfds == 2 && fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	json_decref(out);
	/* Not JSON: an error, and the fds that came with it are closed, not leaked. */
	CHECK(send(sv[0], "nope", 4, 0) == 4);
	CHECK(gw_ctl_recv(sv[1], &out, fds, &nfds, &cause) == -1 && nfds == 0);
	CHECK_CAUSE(cause, "bad message");
	free(cause);
	cause = NULL;
	/* Nothing queued on a non-blocking socket: a code, not a cause to compare. */
	CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
	CHECK(gw_ctl_recv(sv[1], &out, fds, &nfds, &cause) == GW_CTL_AGAIN && cause == NULL);
	/* A full socket on send likewise. */
	CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	{
		int rc;

		while ((rc = gw_ctl_send(sv[0], in, NULL, 0, &cause)) == 0)
			;
		CHECK(rc == GW_CTL_AGAIN && cause == NULL);
	}
	close(sv[0]);
	while (gw_ctl_recv(sv[1], &out, fds, &nfds, &cause) == 1)
		json_decref(out);
	CHECK(gw_ctl_recv(sv[1], &out, fds, &nfds, &cause) == 0);
	close(sv[1]);
	close(pass[0]);
	close(pass[1]);
	json_decref(in);
}

static void
test_audit(void)
{
	char dir[] = "/tmp/airlock-audit-XXXXXX", *p, *data = NULL;
	struct gw_audit *a;
	struct gw_audit_rec r = { .sandbox = "sb1", .kind = "http", .host = "a\"\nb",
	    .path = "/x\xff\xfe", .allow = 0, .reason = "host-not-allowed", .credential = "GH" };
	size_t len;

	CHECK(mkdtemp(dir) != NULL);
	CHECK((a = gw_audit_open(dir, 300, 2, NULL)) != NULL);
	for (int i = 0; i < 10; i++)
		gw_audit_log(a, &r);
	gw_audit_close(a);
	xasprintf(&p, "%s/audit.log.1", dir);
	CHECK(path_exists(p));
	free(p);
	xasprintf(&p, "%s/audit.log.3", dir);
	CHECK(!path_exists(p));
	free(p);
	xasprintf(&p, "%s/audit.log", dir);
	CHECK(read_file(p, 1 << 20, &data, &len, NULL) == 0);
	/* One line per record, the newline inside the host escaped. */
	CHECK(data != NULL && strstr(data, "\"host\":\"a\\\"\\nb\"") != NULL);
	CHECK(data != NULL && strstr(data, "\"decision\":\"deny\"") != NULL);
	/* Invalid UTF-8 from the guest is escaped, never dropped. */
	CHECK(data != NULL && strstr(data, "\"path\":\"/x%FF%FE\"") != NULL);
	CHECK(data != NULL && data[len - 1] == '\n');
	free(data);
	free(p);
	remove_tree(dir, NULL);
}

int
main(void)
{
	T_RUN(test_names);
	T_RUN(test_parse_errors);
	T_RUN(test_headers);
	T_RUN(test_matching);
	T_RUN(test_denied);
	T_RUN(test_ctl);
	T_RUN(test_audit);
	return t_done();
}
