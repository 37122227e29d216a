/* The CPU this service may use.  On a host that is the machine's; in a
 * container (Docker --cpus, Kubernetes limits, Cloud Run) it is what its
 * cgroup allows, which sysconf(_SC_NPROCESSORS_ONLN) and /proc/stat do not
 * tell: they show the host's cores and the host's idle time.
 *
 * The cores: the CPUs of the process's affinity mask (a cpuset), fewer
 * when the root of the cgroup file system has a CPU quota (v2 cpu.max, v1
 * cpu.cfs_quota_us over cpu.cfs_period_us), rounded up; at least 1.  The
 * root is where the sandboxes' cgroups are made (sandbox/cgroups.c): a
 * host's real root, which has no quota, or a container's own cgroup.  A
 * quota on a host's systemd unit does not bind the sandboxes beside it and
 * does not count.
 * The idle share: with a binding quota, the quota's time less the root's
 * usage (v2 cpu.stat usage_usec, v1 cpuacct.usage); else /proc/stat. */
#ifndef MCP_CPUS_H
#define MCP_CPUS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* CPU time, all of it and the part idle: the machine's since boot in
 * /proc/stat's ticks (its first line; idle and iowait), or a quota's in
 * microseconds (cpu_limit_sample).  Only differences of two samples of
 * one kind mean anything (cpu_idle_percent). */
struct cpu_sample {
  uint64_t total, idle;
};
/* Parse /proc/stat's text: 0, or -1 when it has no cpu line. */
int cpu_sample_parse(const char *text, struct cpu_sample *s);
/* The percent of the CPU idle from a to b (0-100), -1 when no tick passed. */
int cpu_idle_percent(const struct cpu_sample *a, const struct cpu_sample *b);
/* Read /proc/stat now: 0, or -1. */
int cpu_sample_read(struct cpu_sample *s);

/* What limits the CPU, found once per process (cpus_usable, cpus_sample
 * look it up on first use). */
struct cpu_limit {
  long cores;           /* usable cores, >= 1 */
  long quota_cores;     /* the quota in cores, rounded up; 0 without a binding quota */
  char usage[PATH_MAX]; /* the root's usage file when quota_cores > 0 */
  bool usage_v2;        /* cpu.stat (usage_usec) rather than cpuacct.usage (ns) */
};

/* Find the limit from the cgroup file system mounted at root (normally
 * /sys/fs/cgroup) and the affinity mask's CPU count (a unit test passes a
 * folder of its own). */
void cpu_limit_find(const char *root, long cpus, struct cpu_limit *out);
/* A sample of the CPU the limit leaves (struct cpu_sample's units:
 * microseconds of the quota's cores when the quota binds, else
 * /proc/stat's ticks): 0, or -1. */
int cpu_limit_sample(const struct cpu_limit *l, struct cpu_sample *s);

/* This process's: the usable cores, and a sample for cpu_idle_percent. */
long cpus_usable(void);
int cpus_sample(struct cpu_sample *s);

#endif
