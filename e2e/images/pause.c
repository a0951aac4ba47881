// The pod sandbox's init process for the e2e cluster (docs/e2e.md): holds the pod's namespaces,
// reaps orphans, and exits on SIGINT/SIGTERM. Built statically here so that containerd never
// pulls a sandbox image.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested = 0;

static void on_stop(int sig) {
  (void)sig;
  stop_requested = 1;
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = on_child;
  sa.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  while (!stop_requested) pause();
  return 0;
}
