/* The build context of `airlock template build --dockerfile`: a plain tar for the API. */
#ifndef AIRLOCK_CLI_CONTEXT_H
#define AIRLOCK_CLI_CONTEXT_H

#define CLI_CONTEXT_DOCKERFILE	".airlock/Dockerfile"

/*
 * Write dir's tree (may be NULL: none) and the Dockerfile (as
 * CLI_CONTEXT_DOCKERFILE) into an unlinked temporary file; its fd, rewound,
 * or -1 with a cause. Owners become root (the client's uids mean nothing
 * in the guest); sockets, FIFOs and devices are left out with a warning.
 */
int cli_context_tar(const char *dir, const char *dockerfile, char **cause);

#endif
