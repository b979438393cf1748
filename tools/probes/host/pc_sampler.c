// A sampling CPU profiler for machines without perf (such as a GPU host without a toolchain): LD_PRELOAD it with
// PC_SAMPLER_OUT=<prefix> and every thread of the process gets a CPU-time timer
// (CLOCK_THREAD_CPUTIME_ID, every PC_SAMPLER_US microseconds of its own CPU time, default 50) whose
// signal records the interrupted instruction pointer. At exit it writes <prefix>.<pid>.txt:
// /proc/self/maps, then one "pc tid" line per sample. launch/pc-profile-report turns that into a
// flat profile by function. A probe, not a test.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_SAMPLES (1u << 22)

struct sample {
  uintptr_t pc;
  int32_t tid;
};

static struct sample* samples;
static atomic_size_t taken;
static atomic_int on;
static long period_ns = 50000;

static void on_signal(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  if (!atomic_load_explicit(&on, memory_order_relaxed)) return;
  const size_t i = atomic_fetch_add_explicit(&taken, 1, memory_order_relaxed);
  if (i >= MAX_SAMPLES) return;
  const ucontext_t* uc = (const ucontext_t*)context;
  samples[i].pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  samples[i].tid = (int32_t)syscall(SYS_gettid);
}

// A timer on the calling thread's own CPU clock, signalling that thread.
static void arm_this_thread(void) {
  if (!atomic_load(&on)) return;
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  timer_t timer;
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &timer) != 0) return;
  struct itimerspec spec = {{0, period_ns}, {0, period_ns}};
  timer_settime(timer, 0, &spec, NULL);
}

struct start {
  void* (*fn)(void*);
  void* arg;
};

static void* trampoline(void* p) {
  struct start s = *(struct start*)p;
  free(p);
  arm_this_thread();
  return s.fn(s.arg);
}

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  static int (*real)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  if (real == NULL)
    real = (int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*))dlsym(RTLD_NEXT, "pthread_create");
  struct start* s = atomic_load(&on) ? malloc(sizeof *s) : NULL;
  if (s == NULL) return real(thread, attr, fn, arg);
  s->fn = fn;
  s->arg = arg;
  const int r = real(thread, attr, trampoline, s);
  if (r != 0) free(s);
  return r;
}

static char out_path[4096];

__attribute__((constructor)) static void start_sampling(void) {
  const char* prefix = getenv("PC_SAMPLER_OUT");
  if (prefix == NULL || *prefix == 0) return;
  const char* us = getenv("PC_SAMPLER_US");
  if (us != NULL && atol(us) > 0) period_ns = atol(us) * 1000;
  snprintf(out_path, sizeof out_path, "%s.%d.txt", prefix, (int)getpid());
  samples = mmap(NULL, MAX_SAMPLES * sizeof(struct sample), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (samples == MAP_FAILED) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0) return;
  atomic_store(&on, 1);
  arm_this_thread();
}

__attribute__((destructor)) static void write_samples(void) {
  if (!atomic_exchange(&on, 0)) return;
  FILE* out = fopen(out_path, "w");
  if (out == NULL) return;
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[4096];
  fputs("# maps\n", out);
  while (maps != NULL && fgets(line, sizeof line, maps) != NULL) fputs(line, out);
  if (maps != NULL) fclose(maps);
  size_t n = atomic_load(&taken);
  if (n > MAX_SAMPLES) n = MAX_SAMPLES;
  fprintf(out, "# samples %zu period_us %ld\n", n, period_ns / 1000);
  for (size_t i = 0; i < n; ++i) fprintf(out, "%lx %d\n", (unsigned long)samples[i].pc, (int)samples[i].tid);
  fclose(out);
}
