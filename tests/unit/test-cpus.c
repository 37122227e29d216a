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

static void v1_tests(void) {
  struct cpu_limit l;
  char v1[300], want[600];
  snprintf(v1, sizeof(v1), "%s/v1", root);
  put("v1/cpu/cpu.shares", "1024\n");
  cpu_limit_find(v1, 16, &l);
  is_int(l.cores, 16, "v1 without quota files: the affinity mask's 16 CPUs");
  is_int(l.quota_cores, 0, "no quota");

  put("v1/cpu/cpu.cfs_quota_us", "-1\n");
  put("v1/cpu/cpu.cfs_period_us", "100000\n");
  cpu_limit_find(v1, 16, &l);
  is_int(l.cores, 16, "v1, quota -1 (a host's root, or no limit): 16");

  /* A quota below the root (a host's systemd unit) binds the service but
   * not the sandboxes, whose cgroups are made at the root. */
  put("v1/cpu/system.slice/mcp.service/cpu.cfs_quota_us", "100000\n");
  put("v1/cpu/system.slice/mcp.service/cpu.cfs_period_us", "100000\n");
  cpu_limit_find(v1, 16, &l);
  is_int(l.cores, 16, "a quota below the root does not count");

  /* A container's cgroup is the root it sees. */
  put("v1/cpu/cpu.cfs_quota_us", "150000\n");
  cpu_limit_find(v1, 16, &l);
  is_int(l.cores, 2, "v1, 150000 of 100000 us at the root (docker --cpus=1.5): 2 cores, rounded up");
  is_int(l.quota_cores, 2, "the quota binds");
  ok(!l.usage_v2, "v1 usage");
  snprintf(want, sizeof(want), "%s/cpuacct/cpuacct.usage", v1);
  is_str(l.usage, want, "from cpuacct.usage");
  cpu_limit_find(v1, 2, &l);
  is_int(l.quota_cores, 0, "a quota no smaller than the CPUs does not bind");
  is_int(l.cores, 2, "the CPUs then");

  put("v1/cpu/cpu.cfs_quota_us", "300000\n");
  put("v1/cpuacct/cpuacct.usage", "2000000000\n");
  cpu_limit_find(v1, 8, &l);
  is_int(l.cores, 3, "300000 of 100000 us: 3 cores");
  struct cpu_sample a, b;
  ok(cpu_limit_sample(&l, &a) == 0, "a sample from cpuacct.usage");
  usleep(100 * 1000);
  put("v1/cpuacct/cpuacct.usage", "2150000000\n"); /* 150 ms used */
  ok(cpu_limit_sample(&l, &b) == 0, "a later sample");
  int idle = cpu_idle_percent(&a, &b);
  /* 0.1 s or a little more of 3 cores is 300 ms; 150 ms used: about 50%. */
  ok(idle >= 45 && idle <= 70, "150 ms used of 3 cores over 0.1 s: about half idle (%d%%)", idle);
}

static void v2_tests(void) {
  struct cpu_limit l;
  char v2[300], want[600];
  snprintf(v2, sizeof(v2), "%s/v2", root);
  put("v2/cgroup.controllers", "cpu memory pids\n");
  cpu_limit_find(v2, 64, &l);
  is_int(l.cores, 64, "v2 without cpu.max (a host's root): 64");
  put("v2/cpu.max", "max 100000\n");
  cpu_limit_find(v2, 64, &l);
  is_int(l.cores, 64, "v2, cpu.max max: 64");

  put("v2/cpu.max", "200000 100000\n");
  put("v2/cpu.stat", "usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\n");
  cpu_limit_find(v2, 64, &l);
  is_int(l.cores, 2, "v2, 200000 100000 (a limit of 2): 2");
  ok(l.usage_v2, "v2 usage");
  snprintf(want, sizeof(want), "%s/cpu.stat", v2);
  is_str(l.usage, want, "from cpu.stat");
  struct cpu_sample a, b;
  ok(cpu_limit_sample(&l, &a) == 0, "a sample from cpu.stat");
  usleep(100 * 1000);
  put("v2/cpu.stat", "usage_usec 5200000\nuser_usec 4100000\nsystem_usec 1100000\n");
  ok(cpu_limit_sample(&l, &b) == 0, "a later sample");
  int idle = cpu_idle_percent(&a, &b);
  ok(idle >= 0 && idle <= 20, "200 ms used of 2 cores over 0.1 s: none or little idle (%d%%)", idle);
  put("v2/cpu.stat", "user_usec 1\n");
  ok(cpu_limit_sample(&l, &b) == -1, "cpu.stat without usage_usec: no sample");

  put("v2/cpu.max", "garbage\n");
  cpu_limit_find(v2, 0, &l);
  is_int(l.cores, 1, "no CPUs known and no quota to read: 1");
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
