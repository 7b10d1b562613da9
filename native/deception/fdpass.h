/*
 * fdpass.h - a datagram of one buffer that carries at most one file
 * descriptor (SCM_RIGHTS): the shape of every protocol message that passes
 * an fd (protocol.h). Header-only, because two programs build it: the shim
 * (client.c, a request with the file's fd) and the tests' fake daemon
 * (tests/fake_daemon.c, a reply with a stray fd, to test that the shim
 * refuses it). Each sends the message with its own call: the shim uses the
 * raw syscall, which is not a cancellation point.
 */
#ifndef LCP_FDPASS_H
#define LCP_FDPASS_H

#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Room for one fd's control message, aligned for struct cmsghdr. */
union lcp__fd_control {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

/* Point msg at [data, data+len) through iov, with fd attached if fd >= 0. */
static inline void lcp__fdpass_message(struct msghdr *msg, struct iovec *iov, union lcp__fd_control *control,
				       const void *data, size_t len, int fd)
{
	memset(msg, 0, sizeof(*msg));
	iov->iov_base = (void *)data;
	iov->iov_len = len;
	msg->msg_iov = iov;
	msg->msg_iovlen = 1;
	if (fd >= 0) {
		struct cmsghdr *cmsg;

		memset(control, 0, sizeof(*control));
		msg->msg_control = control->buf;
		msg->msg_controllen = sizeof(control->buf);
		cmsg = CMSG_FIRSTHDR(msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	}
}

#endif /* LCP_FDPASS_H */
