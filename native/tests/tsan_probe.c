/*
 * tsan_probe.c - can ThreadSanitizer run on this machine? Built with
 * -fsanitize=thread; starts a thread that touches shared memory under a
 * lock. Exits 0 when the runtime came up (its start-up fails on some memory
 * layouts, e.g. with more ASLR entropy than it supports), non-zero with the
 * runtime's message otherwise. tests/run uses it to skip the TSan variant
 * with the reason instead of failing every test.
 */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int shared;

static void *worker(void *arg)
{
	pthread_mutex_lock(&lock);
	shared++;
	pthread_mutex_unlock(&lock);
	return arg;
}

int main(void)
{
	pthread_t thread;

	if (pthread_create(&thread, NULL, worker, NULL) != 0)
		return 1;
	worker(NULL);
	pthread_join(thread, NULL);
	printf("tsan probe: %d\n", shared);
	return shared == 2 ? 0 : 1;
}
