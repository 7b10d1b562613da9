/*
 * t_laio_many.c - many operations outstanding at once, on both back ends:
 * 1200 recv calls of one byte each wait on one socket (eager: 1200 helper
 * threads, the pool grown on demand; lazy: 1200 requests in the ring), then
 * 1200 bytes arrive. Every call completes exactly once with one byte, each
 * byte is delivered once, and the handles are the ones laio_gethandle() gave.
 * Meanwhile inline calls still complete inline (lazy).
 */
#include "ltest.h"

#include <sys/socket.h>

#define N 1200

static void body(void)
{
	static laio_handle_t handles[N];
	static unsigned char buf[N], seen_byte[N];
	static struct laio_completion c[64];
	static char seen[N];
	struct outcome o;
	int sv[2], total = 0;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	for (int i = 0; i < N; i++) {
		start_call(&o, SYS_recvfrom, sv[0], &buf[i], 1, 0, 0, 0);
		CHECK(o.background);
		handles[i] = o.handle;
		CHECK(i == 0 || handles[i] > handles[i - 1]);
	}
	if (lazy())
		CHECK(laio_syscall(SYS_getpid) == getpid());
	for (int i = 0; i < N; i++) {
		unsigned char b = (unsigned char)(i % 251);

		CHECK(write(sv[1], &b, 1) == 1);
	}
	while (total < N) {
		struct timespec ten = { 10, 0 };
		int n = laio_poll(c, 64, &ten);

		CHECK(n > 0);
		for (int k = 0; k < n; k++) {
			long i = c[k].laio_handle - handles[0];

			CHECK(i >= 0 && i < N && handles[i] == c[k].laio_handle);
			CHECK(!seen[i]);
			seen[i] = 1;
			CHECK(c[k].laio_return_value == 1 && c[k].laio_errno == 0);
		}
		total += n;
	}
	/* Each byte value i % 251 was sent ceil or floor of N/251 times. */
	for (int i = 0; i < N; i++)
		seen_byte[buf[i]]++;
	for (int v = 0; v < 251; v++)
		CHECK(seen_byte[v] == N / 251 + (v < N % 251));
	{
		struct timespec zero = { 0, 0 };

		CHECK(laio_poll(c, 64, &zero) == 0);
	}
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	return for_each_backend(body);
}
