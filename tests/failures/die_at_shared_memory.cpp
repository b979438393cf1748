// An LD_PRELOAD interposer for the failure tests: the rank named by ATOMR_TEST_DIE_RANK (its
// OMPI_COMM_WORLD_RANK) kills itself (SIGKILL) the moment it opens shared memory that another
// rank made: shm_open without O_CREAT, or open() of another process's descriptor under
// /proc/<pid>/fd/. That is the exact moment a rank's death used to leave a segment in /dev/shm
// (its maker had made it and waited for the others to open it), reached without timed signals.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>

namespace {

bool chosen() {
  const char* want = getenv("ATOMR_TEST_DIE_RANK");
  const char* me = getenv("OMPI_COMM_WORLD_RANK");
  return want != nullptr && me != nullptr && std::strcmp(want, me) == 0;
}

}  // namespace

extern "C" {

int shm_open(const char* name, int flags, mode_t mode) {
  if (!(flags & O_CREAT) && chosen()) raise(SIGKILL);
  using real_fn = int (*)(const char*, int, mode_t);
  auto real = reinterpret_cast<real_fn>(dlsym(RTLD_NEXT, "shm_open"));
  return real(name, flags, mode);
}

int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = static_cast<mode_t>(va_arg(ap, int));
    va_end(ap);
  }
  if (std::strncmp(path, "/proc/", 6) == 0 && std::strstr(path, "/fd/") != nullptr && chosen()) raise(SIGKILL);
  using real_fn = int (*)(const char*, int, ...);
  auto real = reinterpret_cast<real_fn>(dlsym(RTLD_NEXT, "open"));
  return real(path, flags, mode);
}

}  // extern "C"
