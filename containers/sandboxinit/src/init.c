/*
 * code-sandbox-init: pid 1 of every sandbox.
 *
 *   code-sandbox-init -- PROGRAM [ARG...]
 *   code-sandbox-init --version
 *
 * It runs PROGRAM as its one child, in a process group of its own, with
 * the signal mask it was given; forwards to that child every signal it
 * gets but SIGCHLD (and SIGKILL and SIGSTOP, which no process can catch,
 * and the faults below, which end the init); reaps every process that
 * ends in the sandbox; and
 * exits as soon as the child has ended, with its exit status, or 128+N
 * when signal N killed it. The kernel then ends whatever else still runs
 * in the sandbox's pid namespace. That much is what tini does.
 *
 * What tini does not do, and this does: once the child runs, the init lets
 * go of its own copies of the standard streams (it points them at
 * /dev/null), so that the program's output ends with the program and the
 * processes it left, not with the init. The server can then take the
 * program's end as the run's end, without waiting for the init to wake,
 * reap and exit (exec/internal/sandbox: waitExit).
 *
 * A child killed by SIGKILL, which is what the kernel's OOM killer sends,
 * holds the init LINGER_MS before it exits (reaping what else ends
 * meanwhile): the sandbox's cgroup goes with its last process under the
 * systemd cgroup driver, and with it the cgroup's count of OOM kills,
 * which the server reads when the kernel reports the child's end
 * (exec/internal/watch). The server's run ends with the child's end, not
 * the init's, so the result does not wait for this.
 *
 * A program it cannot exec is reported on the child's stderr as
 * "[FATAL code-sandbox-init] exec PROGRAM failed: REASON", in tini's
 * words, and the child exits 127 (no such file), 126 (not executable)
 * or 1.
 *
 * Built static (containers/sandboxinit: Build), so that an image need not
 * hold a C library or a loader; it is bind-mounted read-only into every
 * sandbox.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NAME "code-sandbox-init"
/* VERSION changes with what the init does. */
#define VERSION "2"
/* LINGER_MS: see above. */
#define LINGER_MS 500

/*
 * The signals the kernel sends a process for its own fault: left
 * unblocked, so that a fault of the init kills it rather than being
 * forwarded to the program as if somebody had sent it.
 */
static const int faults[] = {SIGFPE, SIGILL, SIGSEGV, SIGBUS, SIGABRT, SIGTRAP, SIGSYS};

static void fatal(const char *what)
{
	fprintf(stderr, "[FATAL " NAME "] %s: %s\n", what, strerror(errno));
}

/* child becomes argv[0] of the program, or exits saying why not. */
static void child(char **argv, const sigset_t *mask)
{
	int status = 1;

	/* As tini does: the program leads a process group of its own. */
	if (setpgid(0, 0) < 0) {
		fatal("setpgid");
		_exit(1);
	}
	if (sigprocmask(SIG_SETMASK, mask, NULL) < 0) {
		fatal("sigprocmask");
		_exit(1);
	}
	execvp(argv[0], argv);
	switch (errno) {
	case ENOENT:
		status = 127;
		break;
	case EACCES:
		status = 126;
		break;
	}
	fprintf(stderr, "[FATAL " NAME "] exec %s failed: %s\n", argv[0], strerror(errno));
	_exit(status);
}

/*
 * release points the init's standard streams at /dev/null: the program
 * holds the sandbox's, and the init writes nothing once it runs.
 */
static void release(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int fd;

	for (fd = 0; fd <= 2; fd++) {
		if (null < 0 || dup2(null, fd) < 0)
			close(fd);
	}
	if (null > 2)
		close(null);
}

/* status is how a wait status reads as an exit status: 128+N for signal N. */
static int status(int ws)
{
	if (WIFEXITED(ws))
		return WEXITSTATUS(ws);
	if (WIFSIGNALED(ws))
		return 128 + WTERMSIG(ws);
	return 1;
}

/*
 * linger waits LINGER_MS, by the monotonic clock, reaping every process
 * that ends meanwhile; other signals are dropped (the child they were for
 * is gone).
 */
static void linger(const sigset_t *all)
{
	struct timespec now, end, left;
	siginfo_t si;
	int ws;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_nsec += (long)LINGER_MS * 1000000L;
	end.tv_sec += end.tv_nsec / 1000000000L;
	end.tv_nsec %= 1000000000L;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000L;
		}
		if (left.tv_sec < 0)
			return;
		if (sigtimedwait(all, &si, &left) == SIGCHLD) {
			while (waitpid(-1, &ws, WNOHANG) > 0)
				;
		}
	}
}

int main(int argc, char **argv)
{
	sigset_t all, given;
	siginfo_t si;
	pid_t pid, ended;
	int ws;
	size_t i;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf(NAME " " VERSION "\n");
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "--") == 0) {
		argv++;
		argc--;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: " NAME " -- PROGRAM [ARG...]\n");
		return 2;
	}

	sigfillset(&all);
	for (i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(&all, faults[i]);
	if (sigprocmask(SIG_SETMASK, &all, &given) < 0) {
		fatal("sigprocmask");
		return 1;
	}
	/*
	 * Outside a pid namespace of its own (its tests), the orphans of the
	 * program come to it all the same.
	 */
	if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		fatal("prctl(PR_SET_CHILD_SUBREAPER)");
		return 1;
	}

	pid = fork();
	if (pid < 0) {
		fatal("fork");
		return 1;
	}
	if (pid == 0)
		child(argv + 1, &given);
	release();

	for (;;) {
		int sig = sigwaitinfo(&all, &si);

		if (sig < 0)
			continue; /* EINTR: a stop and continue */
		if (sig != SIGCHLD) {
			/* Gone already: the next SIGCHLD ends the init. */
			kill(pid, sig);
			continue;
		}
		while ((ended = waitpid(-1, &ws, WNOHANG)) > 0) {
			if (ended != pid)
				continue;
			if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)
				linger(&all);
			return status(ws);
		}
	}
}
