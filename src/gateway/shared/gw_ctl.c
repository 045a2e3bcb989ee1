/* Control messages: one JSON object per SOCK_SEQPACKET record, fds via SCM_RIGHTS. */
#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "gateway/shared/gw_ctl.h"

int
gw_ctl_send(int fd, const json_t *msg, const int *fds, size_t nfds, char **cause)
{
	union {
		char		buf[CMSG_SPACE(sizeof(int) * GW_CTL_MAX_FDS)];
		struct cmsghdr	align;
	} u;
	struct msghdr mh = { 0 };
	struct iovec iov;
	char *text;
	ssize_t n;

	if (nfds > GW_CTL_MAX_FDS) {
		cause_set(cause, "too many fds (%zu)", nfds);
		return -1;
	}
	if ((text = json_dumps(msg, JSON_COMPACT)) == NULL) {
		cause_set(cause, "cannot encode message");
		return -1;
	}
	if (strlen(text) > GW_CTL_MSG_MAX) {
		cause_set(cause, "message too large (%zu bytes)", strlen(text));
		free(text);
		return -1;
	}
	iov.iov_base = text;
	iov.iov_len = strlen(text);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds > 0) {
		struct cmsghdr *cm;

		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	explicit_bzero(text, iov.iov_len);	/* policies carry secret values */
	free(text);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return GW_CTL_AGAIN;
	if (n == -1) {
		cause_set(cause, "sendmsg: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
gw_ctl_recv(int fd, json_t **msg, int *fds, size_t *nfds, char **cause)
{
	union {
		char		buf[CMSG_SPACE(sizeof(int) * GW_CTL_MAX_FDS)];
		struct cmsghdr	align;
	} u;
	struct msghdr mh = { 0 };
	struct cmsghdr *cm;
	struct iovec iov;
	json_error_t err;
	char *buf;
	ssize_t n;
	size_t got = 0;

	*msg = NULL;
	if (nfds != NULL)
		*nfds = 0;
	buf = xmalloc(GW_CTL_MSG_MAX + 1);
	iov.iov_base = buf;
	iov.iov_len = GW_CTL_MSG_MAX + 1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof u.buf;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n == -1 && errno == EINTR);
	if (n == -1) {
		int again = errno == EAGAIN || errno == EWOULDBLOCK;

		if (!again)
			cause_set(cause, "recvmsg: %s", strerror(errno));
		free(buf);
		return again ? GW_CTL_AGAIN : -1;
	}
	/* Take ownership of every received fd first, so none leaks on a bad message. */
	for (cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int rfd;

			memcpy(&rfd, CMSG_DATA(cm) + i * sizeof(int), sizeof rfd);
			if (fds != NULL && got < GW_CTL_MAX_FDS)
				fds[got++] = rfd;
			else
				close(rfd);
		}
	}
	if (nfds != NULL)
		*nfds = got;
	if (n == 0 && got == 0) {
		free(buf);
		return 0;
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n > GW_CTL_MSG_MAX) {
		cause_set(cause, "message truncated");
		goto fail;
	}
	*msg = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &err);
	if (*msg == NULL || !json_is_object(*msg)) {
		cause_set(cause, "bad message: %s", *msg == NULL ? err.text : "not an object");
		json_decref(*msg);
		*msg = NULL;
		goto fail;
	}
	explicit_bzero(buf, (size_t)n);
	free(buf);
	return 1;
fail:
	explicit_bzero(buf, (size_t)n);
	free(buf);
	for (size_t i = 0; i < got; i++)
		close(fds[i]);
	if (nfds != NULL)
		*nfds = 0;
	return -1;
}
