/*
 * pool.c - the helper-thread pool: liblaiogen's design (paper 002, 2.3.2).
 *
 * Each helper runs one call at a time. A call goes to an idle helper if there
 * is one, else a new helper is created for it: the pool grows to the largest
 * number of calls ever outstanding at once and has no size to configure.
 * Helpers never exit (they wait, idle, for the next call); they block every
 * signal, so the program's handlers run on the program's own threads.
 *
 * A helper puts itself back on the idle list before it queues the
 * completion, so a program that collects a completion and issues the next
 * call at once finds it idle rather than creating another.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "laio_int.h"

/* Enough for a system call under ASan or TSan; helpers run no user code. */
#define HELPER_STACK (256 * 1024)

struct helper {
	struct helper *next_idle;
	struct helper *next_all;
	pthread_cond_t cond;	/* signalled when `busy` is set */
	int busy;		/* a call is assigned: nr, a, h */
	long nr;
	long a[6];
	laio_handle_t h;
};

static struct {
	/* Guards the lists and every helper's busy, nr, a, h. */
	pthread_mutex_t lock;
	struct helper *idle;	/* waiting for a call */
	struct helper *all;	/* every helper, for the fork child to free */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void *helper_main(void *arg)
{
	struct helper *self = arg;
	long nr, a[6], ret;
	laio_handle_t h;
	int err;

	pthread_mutex_lock(&pool.lock);
	for (;;) {
		while (!self->busy)
			pthread_cond_wait(&self->cond, &pool.lock);
		nr = self->nr;
		for (int i = 0; i < 6; i++)
			a[i] = self->a[i];
		h = self->h;
		pthread_mutex_unlock(&pool.lock);

		errno = 0;
		ret = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
		err = ret == -1 ? errno : 0;

		pthread_mutex_lock(&pool.lock);
		self->busy = 0;
		self->next_idle = pool.idle;
		pool.idle = self;
		pthread_mutex_unlock(&pool.lock);
		laio__complete(h, ret, err);
		pthread_mutex_lock(&pool.lock);
	}
	return NULL;
}

/* Called with the pool lock held. */
static int spawn(struct helper *hp)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	int r;

	if (pthread_attr_init(&attr))
		return -ENOMEM;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, HELPER_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);	/* the helper inherits it */
	r = pthread_create(&tid, &attr, helper_main, hp);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -r;
}

int laio__pool_start(long nr, const long a[6], laio_handle_t h)
{
	struct helper *hp;
	int fresh = 0, r = 0;

	pthread_mutex_lock(&pool.lock);
	hp = pool.idle;
	if (hp) {
		pool.idle = hp->next_idle;
	} else {
		hp = calloc(1, sizeof(*hp));
		if (!hp) {
			pthread_mutex_unlock(&pool.lock);
			return -ENOMEM;
		}
		pthread_cond_init(&hp->cond, NULL);
		fresh = 1;
	}
	hp->nr = nr;
	for (int i = 0; i < 6; i++)
		hp->a[i] = a[i];
	hp->h = h;
	hp->busy = 1;
	if (fresh) {
		r = spawn(hp);
		if (r < 0) {
			pthread_cond_destroy(&hp->cond);
			free(hp);
		} else {
			hp->next_all = pool.all;
			pool.all = hp;
		}
	} else {
		pthread_cond_signal(&hp->cond);
	}
	pthread_mutex_unlock(&pool.lock);
	return r;
}

void laio__pool_lock(void)
{
	pthread_mutex_lock(&pool.lock);
}

void laio__pool_unlock(void)
{
	pthread_mutex_unlock(&pool.lock);
}

/* The child has no helpers: they were threads of the parent. */
void laio__pool_reset_child(void)
{
	struct helper *hp = pool.all, *next;

	for (; hp; hp = next) {
		next = hp->next_all;
		free(hp);	/* its cond may be mid-wait in the parent: not destroyed */
	}
	pool.all = pool.idle = NULL;
}
