/*
 * clockshim: an LD_PRELOAD library that shifts a process's wall clock.
 *
 * Built by internal/redisserver (BuildClockShim) with the machine's C
 * compiler and loaded into a redis-server started with Options.ClockShim.
 * CLOCK_REALTIME (and its coarse variant), gettimeofday and time return the
 * real wall clock plus an offset in nanoseconds; the monotonic clocks are
 * untouched, as with a badly set system clock. The offset is a signed 64-bit
 * little-endian integer in the file named by FENCEDQ_CLOCK_OFFSET_FILE,
 * mapped shared into the process: rewriting the file (Server.SetClockOffset)
 * moves the clock at once, without a restart, and each process has its own
 * file. Without the variable, or when the file cannot be mapped, the offset
 * is zero.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_ns;
static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int initialised;

static void init(void) {
  if (initialised) return;
  initialised = 1;
  real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  const char *path = getenv("FENCEDQ_CLOCK_OFFSET_FILE");
  if (!path) return;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return;
  void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED) offset_ns = (volatile int64_t *)p;
}

__attribute__((constructor)) static void clockshim_init(void) { init(); }

static int64_t offset(void) {
  return offset_ns ? __atomic_load_n(offset_ns, __ATOMIC_RELAXED) : 0;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  init();
  int r = real_clock_gettime ? real_clock_gettime(clk, ts) : (int)syscall(SYS_clock_gettime, clk, ts);
  if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset();
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    if (ts->tv_nsec < 0) {
      ts->tv_nsec += 1000000000;
      ts->tv_sec--;
    }
  }
  return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  (void)tz;
  if (r != 0) return r;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}
