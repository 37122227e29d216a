/* common/cpus.c: the cores the service may use and the idle share it
 * judges by, from a fake cgroup file system in a temporary folder (v1
 * hierarchies cpu and cpuacct, a v2 one), as a container with a CPU quota
 * shows them at its root, and without a quota (the affinity mask's CPUs). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/util.h"
#include "tap.h"

static char root[256];

/* root/<rel>, its folders made, holding text. */
static void put(const char *rel, const char *text) {
  char path[1024];
  mcp_error_t err = NULL;
  snprintf(path, sizeof(path), "%s/%s", root, rel);
  char *slash = strrchr(path, '/');
  *slash = '\0';
  if (mkdir_p(path, 0755, &err) < 0)
    bail_out("mkdir %s: %s", path, err->msg);
  *slash = '/';
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write_all(fd, text, strlen(text)) < 0)
    bail_out("write %s: %s", path, strerror(errno));
  close(fd);
}

/* Write text to root/rel (none when NULL), then find the limit of the
 * cgroup file system root/fs with cpus CPUs: its cores. */
static long cores_after(const char *rel, const char *text, const char *fs, long cpus, struct cpu_limit *l) {
  char dir[300];
  if (rel != NULL)
    put(rel, text);
  snprintf(dir, sizeof(dir), "%s/%s", root, fs);
  cpu_limit_find(dir, cpus, l);
  return l->cores;
}

/* The idle percent the limit's samples give when the usage file rel goes
 * from `before` to `after` over 0.1 s (-2: no sample). */
static int idle_over(const struct cpu_limit *l, const char *rel, const char *before, const char *after) {
  struct cpu_sample a, b;
  put(rel, before);
  if (cpu_limit_sample(l, &a) < 0)
    return -2;
  usleep(100 * 1000);
  put(rel, after);
  return cpu_limit_sample(l, &b) < 0 ? -2 : cpu_idle_percent(&a, &b);
}

static void v1_tests(void) {
  struct cpu_limit l;
  char want[600];
  is_int(cores_after("v1/cpu/cpu.shares", "1024\n", "v1", 16, &l), 16,
         "v1 without quota files: the affinity mask's 16 CPUs");
  is_int(l.quota_cores, 0, "no quota");
  put("v1/cpu/cpu.cfs_period_us", "100000\n");
  is_int(cores_after("v1/cpu/cpu.cfs_quota_us", "-1\n", "v1", 16, &l), 16,
         "v1, quota -1 (a host's root, or no limit): 16");

  /* A quota below the root (a host's systemd unit) binds the service but
   * not the sandboxes, whose cgroups are made at the root. */
  put("v1/cpu/system.slice/mcp.service/cpu.cfs_period_us", "100000\n");
  is_int(cores_after("v1/cpu/system.slice/mcp.service/cpu.cfs_quota_us", "100000\n", "v1", 16, &l), 16,
         "a quota below the root does not count");

  /* A container's cgroup is the root it sees. */
  is_int(cores_after("v1/cpu/cpu.cfs_quota_us", "150000\n", "v1", 16, &l), 2,
         "v1, 150000 of 100000 us at the root (docker --cpus=1.5): 2 cores, rounded up");
  is_int(l.quota_cores, 2, "the quota binds");
  ok(!l.usage_v2, "v1 usage");
  snprintf(want, sizeof(want), "%s/v1/cpuacct/cpuacct.usage", root);
  is_str(l.usage, want, "from cpuacct.usage");
  is_int(cores_after(NULL, NULL, "v1", 2, &l), 2, "a quota no smaller than the CPUs does not bind: the CPUs");
  is_int(l.quota_cores, 0, "no binding quota");

  is_int(cores_after("v1/cpu/cpu.cfs_quota_us", "300000\n", "v1", 8, &l), 3, "300000 of 100000 us: 3 cores");
  int idle = idle_over(&l, "v1/cpuacct/cpuacct.usage", "2000000000\n", "2150000000\n");
  /* 0.1 s or a little more of 3 cores is 300 ms; 150 ms used: about 50%. */
  ok(idle >= 45 && idle <= 70, "150 ms used of 3 cores over 0.1 s: about half idle (%d%%)", idle);
}

static void v2_tests(void) {
  struct cpu_limit l;
  char want[600];
  is_int(cores_after("v2/cgroup.controllers", "cpu memory pids\n", "v2", 64, &l), 64,
         "v2 without cpu.max (a host's root): 64");
  is_int(cores_after("v2/cpu.max", "max 100000\n", "v2", 64, &l), 64, "v2, cpu.max max: 64");
  is_int(cores_after("v2/cpu.max", "200000 100000\n", "v2", 64, &l), 2, "v2, 200000 100000 (a limit of 2): 2");
  ok(l.usage_v2, "v2 usage");
  snprintf(want, sizeof(want), "%s/v2/cpu.stat", root);
  is_str(l.usage, want, "from cpu.stat");
  int idle = idle_over(&l, "v2/cpu.stat", "usage_usec 5000000\nuser_usec 4000000\n",
                       "usage_usec 5200000\nuser_usec 4100000\n");
  ok(idle >= 0 && idle <= 20, "200 ms used of 2 cores over 0.1 s: none or little idle (%d%%)", idle);
  is_int(idle_over(&l, "v2/cpu.stat", "user_usec 1\n", "user_usec 2\n"), -2, "cpu.stat without usage_usec: no sample");
  is_int(cores_after("v2/cpu.max", "garbage\n", "v2", 0, &l), 1, "no CPUs known and no quota to read: 1");
}

int main(void) {
  snprintf(root, sizeof(root), "/tmp/mcp-test-cpus-XXXXXX");
  if (mkdtemp(root) == NULL)
    bail_out("mkdtemp: %s", strerror(errno));
  v1_tests();
  v2_tests();
  ok(cpus_usable() >= 1, "this process: %ld usable cores", cpus_usable());
  struct cpu_sample s;
  ok(cpus_sample(&s) == 0, "this process: a sample");
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  if (system(cmd) != 0)
    diag("could not remove %s", root);
  return done_testing();
}
