/*
 * httpd.h - laio-httpd's parts and how they meet: main.c reads the settings,
 * binds, drops privileges and runs worker processes; worker.c is one
 * worker's event loop, in which every disk and network call goes through
 * liblaio; http.c (http.h) is the protocol, without I/O.
 */
#ifndef LAIO_HTTPD_HTTPD_H
#define LAIO_HTTPD_HTTPD_H

#include <signal.h>
#include <stddef.h>

/* What a worker needs; filled by main.c, read-only in the workers. */
struct httpd_settings {
	int listen_fd;			/* blocking listener, shared by the workers */
	int docroot_fd;			/* O_PATH|O_DIRECTORY */
	unsigned keepalive_s;		/* idle keep-alive connections are closed after */
	unsigned send_timeout_s;	/* a response that makes no progress is cut after */
	size_t buffer;			/* bytes read from a file per send */
	unsigned max_connections;	/* per worker */
};

/* Set by the SIGTERM/SIGINT handler; a worker exits within a second. */
extern volatile sig_atomic_t httpd_stop;

/* One worker's loop; returns the process exit status. */
int httpd_worker_run(const struct httpd_settings *s, int index);

#endif
