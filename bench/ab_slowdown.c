/* A process that loses a fixed share of its CPU time: loaded with LD_PRELOAD by
 * bench/ab_targets.py's `power` check into stack B's processes, so that everything they
 * compute runs slower by that share, whatever the case and however its process waits.
 *
 * Every millisecond of the process's CPU time (ITIMER_PROF, delivered at the kernel's
 * tick), the signal handler spins on the CPU for fraction / (1 - fraction) of the CPU
 * time the process used since the handler last returned, so that the spinning is that
 * fraction of all the CPU time the process takes. Only a running process is charged:
 * a process waiting for its turn, or for I/O, loses nothing while it waits.
 *
 * ACCELBENCH_SLOWDOWN: the fraction, between 0 and 0.9 (default 0.1). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static double owed_per_ns;
static long long charged_up_to;

static long long now_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void spin(int signal) {
  (void)signal;
  int saved = errno;
  long long owed =
      (long long)((now_ns(CLOCK_PROCESS_CPUTIME_ID) - charged_up_to) * owed_per_ns);
  if (owed > 50000000LL) owed = 50000000LL; /* a late signal spins 50 ms at most */
  long long until = now_ns(CLOCK_THREAD_CPUTIME_ID) + owed;
  while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until) {
  }
  charged_up_to = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  errno = saved;
}

__attribute__((constructor)) static void start(void) {
  const char *given = getenv("ACCELBENCH_SLOWDOWN");
  double fraction = given ? atof(given) : 0.1;
  if (!(fraction > 0.0 && fraction < 0.9)) return;
  owed_per_ns = fraction / (1.0 - fraction);
  struct sigaction action = {0};
  action.sa_handler = spin;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGPROF, &action, NULL) != 0) return;
  charged_up_to = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  struct itimerval every = {{0, 1000}, {0, 1000}};
  setitimer(ITIMER_PROF, &every, NULL);
}
