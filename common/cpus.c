/* The CPU this service may use (see cpus.h). */
#include "config.h"

#include "common/cpus.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/* The quota of one cgroup folder in cores (rounded up), 0 when it has none. */
int cpu_sample_parse(const char *text, struct cpu_sample *s) {
  unsigned long long v[8] = {0};
  /* user nice system idle iowait irq softirq steal (guest time is in user) */
  if (strncmp(text, "cpu ", 4) != 0 || sscanf(text + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                                              &v[3], &v[4], &v[5], &v[6], &v[7]) < 4)
    return -1;
  s->total = 0;
  for (int i = 0; i < 8; i++)
    s->total += v[i];
  s->idle = v[3] + v[4];
  return 0;
}

int cpu_idle_percent(const struct cpu_sample *a, const struct cpu_sample *b) {
  if (b->total <= a->total || b->idle < a->idle)
    return -1;
  uint64_t idle = b->idle - a->idle, total = b->total - a->total;
  return (int)(idle >= total ? 100 : idle * 100 / total);
}

int cpu_sample_read(struct cpu_sample *s) {
  char buf[512]; /* the first line is all it needs */
  return read_kernel_file("/proc/stat", buf, sizeof(buf)) > 0 ? cpu_sample_parse(buf, s) : -1;
}

/* dir/name into text: its length, or <= 0. */
static ssize_t read_in(const char *dir, const char *name, char *text, size_t size) {
  char file[PATH_MAX];
  int n = snprintf(file, sizeof(file), "%s/%s", dir, name);
  return n < 0 || (size_t)n >= sizeof(file) ? -ENAMETOOLONG : read_kernel_file(file, text, size);
}

static long quota_at(const char *dir, bool v2) {
  char text[128];
  long long quota = -1, period = 0;
  if (v2) {
    if (read_in(dir, "cpu.max", text, sizeof(text)) <= 0 || strncmp(text, "max", 3) == 0 ||
        sscanf(text, "%lld %lld", &quota, &period) != 2)
      return 0;
  } else {
    if (read_in(dir, "cpu.cfs_quota_us", text, sizeof(text)) <= 0 || sscanf(text, "%lld", &quota) != 1)
      return 0;
    if (read_in(dir, "cpu.cfs_period_us", text, sizeof(text)) <= 0 || sscanf(text, "%lld", &period) != 1)
      return 0;
  }
  if (quota <= 0 || period <= 0)
    return 0;
  return (long)((quota + period - 1) / period);
}

void cpu_limit_find(const char *root, long cpus, struct cpu_limit *out) {
  memset(out, 0, sizeof(*out));
  out->cores = cpus > 0 ? cpus : 1;
  /* The CPU controller in a v1 hierarchy of its own (also a hybrid
   * host's), else in the unified one. */
  char dir[PATH_MAX];
  int n = snprintf(dir, sizeof(dir), "%s/cpu", root);
  if (n < 0 || (size_t)n >= sizeof(dir))
    return;
  bool v2 = access(dir, F_OK) != 0;
  long q = quota_at(v2 ? root : dir, v2);
  if (q <= 0 || q >= out->cores)
    return;
  out->cores = q;
  out->quota_cores = q;
  out->usage_v2 = v2;
  /* v1: cpuacct beside cpu (its own mount, or the same "cpu,cpuacct"). */
  n = snprintf(out->usage, sizeof(out->usage), v2 ? "%s/cpu.stat" : "%s/cpuacct/cpuacct.usage", root);
  if (n < 0 || (size_t)n >= sizeof(out->usage))
    out->usage[0] = '\0'; /* no sample: the idle part is unknown */
}

int cpu_limit_sample(const struct cpu_limit *l, struct cpu_sample *s) {
  if (l->quota_cores <= 0)
    return cpu_sample_read(s);
  char text[1024];
  if (read_kernel_file(l->usage, text, sizeof(text)) <= 0)
    return -1;
  unsigned long long used = 0;
  if (l->usage_v2) {
    const char *u = strstr(text, "usage_usec ");
    if (u == NULL || sscanf(u + 11, "%llu", &used) != 1)
      return -1;
  } else {
    if (sscanf(text, "%llu", &used) != 1)
      return -1;
    used /= 1000; /* ns */
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t total = ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000) * (uint64_t)l->quota_cores;
  s->total = total;
  /* Beyond the quota's share the cgroup is throttled: no idle then. */
  s->idle = total > used ? total - used : 0;
  return 0;
}

static struct cpu_limit limit;
static pthread_once_t limit_once = PTHREAD_ONCE_INIT;

static void limit_init(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    cpus = CPU_COUNT(&set);
  cpu_limit_find("/sys/fs/cgroup", cpus, &limit);
}

long cpus_usable(void) {
  pthread_once(&limit_once, limit_init);
  return limit.cores;
}

int cpus_sample(struct cpu_sample *s) {
  pthread_once(&limit_once, limit_init);
  return cpu_limit_sample(&limit, s);
}
