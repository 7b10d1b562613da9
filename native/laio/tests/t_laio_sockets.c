/*
 * t_laio_sockets.c - socket call families on both back ends, results and
 * errno equal to the direct call: recv and read with data waiting (lazy:
 * inline) and without (background, completing when data comes); on a
 * non-blocking socket without data (EAGAIN inline, as directly); send,
 * write and writev with room (lazy: inline) and on a full socket
 * (background until the peer reads); write to a closed peer (EPIPE, as
 * directly); accept with a connection pending (lazy: inline) and without
 * (background until a client connects); recvfrom with an address on a
 * datagram socket (the pool).
 */
#include "ltest.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

static void recvs(void)
{
	struct outcome o, d;
	char buf[16];
	int sv[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(write(sv[1], "abc", 3) == 3);
	call(&o, SYS_recvfrom, sv[0], buf, sizeof(buf), 0, 0, 0);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 3 && memcmp(buf, "abc", 3) == 0);

	start_call(&o, SYS_recvfrom, sv[0], buf, sizeof(buf), 0, 0, 0);
	CHECK(o.background);
	CHECK(write(sv[1], "defg", 4) == 4);
	collect(o.handle, &o);
	CHECK(o.ret == 4 && memcmp(buf, "defg", 4) == 0);

	CHECK(write(sv[1], "xy", 2) == 2);
	call(&o, SYS_read, sv[0], buf, sizeof(buf));
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 2 && memcmp(buf, "xy", 2) == 0);
	start_call(&o, SYS_read, sv[0], buf, sizeof(buf));
	CHECK(o.background);
	CHECK(write(sv[1], "z", 1) == 1);
	collect(o.handle, &o);
	CHECK(o.ret == 1 && buf[0] == 'z');

	/* Non-blocking: EAGAIN, as the direct call says, inline in lazy. */
	CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	direct(&d, SYS_recvfrom, sv[0], buf, sizeof(buf), 0, 0, 0);
	call(&o, SYS_recvfrom, sv[0], buf, sizeof(buf), 0, 0, 0);
	EXPECT_MODE(&o, 1);
	SAME(&o, &d);
	CHECK(o.err == EAGAIN);
	direct(&d, SYS_read, sv[0], buf, sizeof(buf));
	call(&o, SYS_read, sv[0], buf, sizeof(buf));
	SAME(&o, &d);
	/* MSG_DONTWAIT on a blocking socket likewise. */
	CHECK(fcntl(sv[0], F_SETFL, 0) == 0);
	call(&o, SYS_recvfrom, sv[0], buf, sizeof(buf), MSG_DONTWAIT, 0, 0);
	EXPECT_MODE(&o, 1);
	CHECK(o.err == EAGAIN);
	direct(&d, SYS_recvfrom, 12345, buf, sizeof(buf), 0, 0, 0);
	call(&o, SYS_recvfrom, 12345, buf, sizeof(buf), 0, 0, 0);
	SAME(&o, &d);
	close(sv[0]);
	close(sv[1]);
}

/*
 * Fill the socket sv[1] writes to, then send the byte ch through the call
 * family nr (sendto, write or writev): it must wait for the reader, in the
 * background on both back ends, and arrive after everything before it.
 */
static void blocked_send(int sv[2], long nr, char ch)
{
	static char big[1 << 16], sink[1 << 16];
	struct iovec v = { &ch, 1 };
	struct outcome o;
	long filled = 0, r, got = 0;
	char last = 0;

	while ((r = send(sv[1], big, sizeof(big), MSG_DONTWAIT)) > 0)
		filled += r;
	CHECK(r == -1 && errno == EAGAIN);
	if (nr == SYS_sendto)
		start_call(&o, SYS_sendto, sv[1], &ch, 1, 0, 0, 0);
	else if (nr == SYS_write)
		start_call(&o, SYS_write, sv[1], &ch, 1);
	else
		start_call(&o, SYS_writev, sv[1], &v, 1);
	CHECK(o.background);
	while (got < filled + 1) {
		r = read(sv[0], sink, sizeof(sink));
		CHECK(r > 0);
		got += r;
		last = sink[r - 1];
	}
	collect(o.handle, &o);
	CHECK(o.ret == 1 && o.err == 0);
	CHECK(got == filled + 1 && last == ch);
}

static void sends(void)
{
	static char sink[1 << 16];
	struct iovec v[2] = { { (void *)"ab", 2 }, { (void *)"cd", 2 } };
	struct outcome o, d;
	int sv[2], size = 4096;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) == 0);
	call(&o, SYS_sendto, sv[1], "hi", 2, 0, 0, 0);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 2);
	call(&o, SYS_write, sv[1], "there", 5);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 5);
	call(&o, SYS_writev, sv[1], v, 2);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 4);
	CHECK(read(sv[0], sink, sizeof(sink)) == 11 && memcmp(sink, "hithereabcd", 11) == 0);

	/* A full socket: each family waits for the reader. */
	blocked_send(sv, SYS_sendto, '!');
	blocked_send(sv, SYS_write, '?');
	blocked_send(sv, SYS_writev, '#');

	/* The peer gone: EPIPE as directly (SIGPIPE ignored for both). */
	close(sv[0]);
	signal(SIGPIPE, SIG_IGN);
	direct(&d, SYS_write, sv[1], "x", 1);
	call(&o, SYS_write, sv[1], "x", 1);
	SAME(&o, &d);
	CHECK(o.err == EPIPE);
	close(sv[1]);
}

static void accepts(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	struct outcome o, d;
	int l, c1, c2;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 8) == 0);
	CHECK(getsockname(l, (struct sockaddr *)&a, &len) == 0);

	c1 = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(c1, (struct sockaddr *)&a, sizeof(a)) == 0);
	call(&o, SYS_accept4, l, 0, 0, SOCK_CLOEXEC);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret >= 0);
	CHECK((fcntl((int)o.ret, F_GETFD) & FD_CLOEXEC) != 0);
	close((int)o.ret);

	start_call(&o, SYS_accept, l, 0, 0);
	CHECK(o.background);
	c2 = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(c2, (struct sockaddr *)&a, sizeof(a)) == 0);
	collect(o.handle, &o);
	CHECK(o.ret >= 0);
	CHECK(write(c2, "q", 1) == 1);
	{
		char ch;

		CHECK(read((int)o.ret, &ch, 1) == 1 && ch == 'q');
	}
	close((int)o.ret);

	/* Non-blocking listener: EAGAIN at once, as directly. */
	CHECK(fcntl(l, F_SETFL, O_NONBLOCK) == 0);
	direct(&d, SYS_accept, l, 0, 0);
	call(&o, SYS_accept, l, 0, 0);
	EXPECT_MODE(&o, 1);
	SAME(&o, &d);
	CHECK(o.err == EAGAIN);
	close(c1);
	close(c2);
	close(l);
}

static void datagrams(void)
{
	struct sockaddr_un from;
	socklen_t fromlen = sizeof(from);
	struct outcome o;
	char buf[8];
	int sv[2];

	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	start_call(&o, SYS_recvfrom, sv[0], buf, sizeof(buf), 0, &from, &fromlen);
	CHECK(o.background);
	CHECK(send(sv[1], "dg", 2, 0) == 2);
	collect(o.handle, &o);
	CHECK(o.ret == 2 && memcmp(buf, "dg", 2) == 0);
	{
		/* The address length written back, as the direct call writes it. */
		socklen_t want = sizeof(from);

		CHECK(send(sv[1], "d2", 2, 0) == 2);
		CHECK(recvfrom(sv[0], buf, sizeof(buf), 0, (struct sockaddr *)&from, &want) == 2);
		CHECK(fromlen == want && fromlen < sizeof(from));
	}
	close(sv[0]);
	close(sv[1]);
}

static void body(void)
{
	recvs();
	sends();
	accepts();
	datagrams();
}

int main(void)
{
	return for_each_backend(body);
}
