/*
 * What a failed guest file operation tells the client. A client's mistake
 * (a missing path, a move across filesystems, a non-empty directory) must
 * read as one, with the errno named, and never as a broken agent: airlockd
 * turns the Connect code into a 4xx and keeps 5xx for the agent's own
 * failures. The codes follow what the E2B SDKs act on: not_found makes
 * exists() false and raises FileNotFoundError, already_exists makes
 * makeDir() return false, invalid_argument raises InvalidArgumentError;
 * REST /files statuses 400, 404 and 507 map to the same errors.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "guest/agent/agent.h"

static const struct {
	int		 err;
	const char	*name;
	const char	*code;
	int		 status;
} errno_map[] = {
	/* The path is not there: exists() is false for a path through a file too. */
	{ ENOENT,	"ENOENT",	"not_found",		404 },
	{ ENOTDIR,	"ENOTDIR",	"not_found",		404 },
	{ EEXIST,	"EEXIST",	"already_exists",	409 },
	/* The request cannot work as asked. */
	{ EISDIR,	"EISDIR",	"invalid_argument",	400 },
	{ EXDEV,	"EXDEV",	"invalid_argument",	400 },
	{ ENAMETOOLONG,	"ENAMETOOLONG",	"invalid_argument",	400 },
	{ ELOOP,	"ELOOP",	"invalid_argument",	400 },
	{ EINVAL,	"EINVAL",	"invalid_argument",	400 },
	{ EFBIG,	"EFBIG",	"invalid_argument",	400 },
	/* The guest's state refuses it now; it may work once that changes. */
	{ ENOTEMPTY,	"ENOTEMPTY",	"failed_precondition",	409 },
	{ EBUSY,	"EBUSY",	"failed_precondition",	409 },
	{ ETXTBSY,	"ETXTBSY",	"failed_precondition",	409 },
	{ EMLINK,	"EMLINK",	"failed_precondition",	409 },
	{ EACCES,	"EACCES",	"permission_denied",	403 },
	{ EPERM,	"EPERM",	"permission_denied",	403 },
	{ EROFS,	"EROFS",	"permission_denied",	403 },
	{ ENOSPC,	"ENOSPC",	"resource_exhausted",	507 },
	{ EDQUOT,	"EDQUOT",	"resource_exhausted",	507 },
	/* The agent's own trouble, not the client's. */
	{ EMFILE,	"EMFILE",	"resource_exhausted",	503 },
	{ ENFILE,	"ENFILE",	"resource_exhausted",	503 },
	{ ENOMEM,	"ENOMEM",	"resource_exhausted",	503 },
	{ EAGAIN,	"EAGAIN",	"unavailable",		503 },
	{ EIO,		"EIO",		"internal",		500 },
};

static int
errno_find(int err)
{
	size_t i;

	for (i = 0; i < sizeof(errno_map) / sizeof(errno_map[0]); i++) {
		if (errno_map[i].err == err)
			return (int)i;
	}
	return -1;
}

const char *
errno_connect_code(int err)
{
	int i = errno_find(err);

	return i >= 0 ? errno_map[i].code : "internal";
}

int
errno_http_status(int err)
{
	int i = errno_find(err);

	return i >= 0 ? errno_map[i].status : 500;
}

const char *
errno_name(int err)
{
	static __thread char other[24];
	int i = errno_find(err);

	if (i >= 0)
		return errno_map[i].name;
	snprintf(other, sizeof(other), "errno %d", err);
	return other;
}
