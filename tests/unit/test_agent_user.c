/*
 * user_lookup (agent_api.c): a passwd name, or a number as an OCI image's
 * USER gives it ("UID", "UID:GID"), found in passwd or, with no entry,
 * still that uid; anything else that is not a passwd name is refused.
 */
#include <stdio.h>
#include <unistd.h>

#include "guest/agent/agent.h"
#include "t.h"

struct agent ag;
void alog(const char *fmt, ...) { (void)fmt; }
void agent_poweroff(const char *why) { (void)why; }

static void
test_lookup(void)
{
	char path[] = "/tmp/agent-user-XXXXXX";
	struct agent_user u;
	FILE *fp;
	int fd;

	fd = mkstemp(path);
	CHECK(fd != -1);
	fp = fdopen(fd, "w");
	fputs("root:x:0:0:root:/root:/bin/bash\n"
	    "broken line\n"
	    "app:x:1234:5678::/app:/bin/sh\n"
	    "user:x:1000:1000::/home/user:\n", fp);
	fclose(fp);
	ag.ag_passwd = path;

	CHECK(user_lookup("app", &u) == 0);
	CHECK(u.uid == 1234 && u.gid == 5678);
	CHECK_STR(u.home, "/app");
	CHECK(user_lookup("user", &u) == 0);
	CHECK_STR(u.shell, "/bin/sh");			/* empty shell field */
	/* By number: the passwd entry's name, home and group. */
	CHECK(user_lookup("1234", &u) == 0);
	CHECK_STR(u.name, "app");
	CHECK(u.uid == 1234 && u.gid == 5678);
	CHECK(user_lookup("0", &u) == 0);
	CHECK_STR(u.name, "root");
	/* UID:GID: the group given wins. */
	CHECK(user_lookup("1234:42", &u) == 0);
	CHECK(u.uid == 1234 && u.gid == 42);
	/* No entry: still that uid, home /. */
	CHECK(user_lookup("4321", &u) == 0);
	CHECK(u.uid == 4321 && u.gid == 4321);
	CHECK_STR(u.home, "/");
	CHECK(user_lookup("4321:7", &u) == 0);
	CHECK(u.uid == 4321 && u.gid == 7);
	/* Refused: unknown names, malformed numbers, empty. */
	CHECK(user_lookup("nobody", &u) == -1);
	CHECK(user_lookup("12x", &u) == -1);
	CHECK(user_lookup("12:", &u) == -1);
	CHECK(user_lookup("12:x", &u) == -1);
	CHECK(user_lookup("99999999999", &u) == -1);
	CHECK(user_lookup("", &u) == -1);
	CHECK(user_lookup(NULL, &u) == -1);
	/* No passwd at all: names fail, numbers still work. */
	unlink(path);
	CHECK(user_lookup("app", &u) == -1);
	CHECK(user_lookup("1234", &u) == 0 && u.uid == 1234);
}

int
main(void)
{
	T_RUN(test_lookup);
	return t_done();
}
