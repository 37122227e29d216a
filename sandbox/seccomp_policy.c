/* Defence in depth behind gVisor: calls that code run by agents never
 * needs are refused with EPERM.  gVisor implements many of them as no-ops
 * or refuses them itself; the policy makes the refusal explicit and keeps
 * it if a later gVisor starts implementing them.  Everything else is
 * allowed: an allow-list would break the libraries agents install. */
#include "config.h"

#include "sandbox/seccomp_policy.h"

#include <errno.h>
#include <seccomp.h>
#include <string.h>

#include "common/util.h"

struct deny_rule {
  const char *names[16];
  const char *why;
};

static const struct deny_rule rules[] = {
    {{"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", NULL},
     "reading or changing another process (the executor) is never needed by a call"},
    {{"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
      "mount_setattr", NULL},
     "the file system layout is fixed by the bundle"},
    {{"unshare", "setns", NULL}, "new namespaces are a way around the sandbox's own"},
    {{"bpf", NULL}, "kernel programs"},
    {{"keyctl", "add_key", "request_key", NULL}, "the kernel keyring is not namespaced"},
    {{"perf_event_open", NULL}, "performance counters are a side channel"},
    {{"io_uring_setup", "io_uring_enter", "io_uring_register", NULL},
     "a large kernel interface with a history of escapes; Python does not use it"},
    {{"kexec_load", "kexec_file_load", "reboot", NULL}, "control of the machine"},
    {{"init_module", "finit_module", "delete_module", NULL}, "kernel modules"},
    {{"userfaultfd", NULL}, "used to stretch race windows in kernel exploits"},
    {{"name_to_handle_at", "open_by_handle_at", NULL}, "file handles bypass path checks (the 'shocker' escape)"},
    {{"acct", "swapon", "swapoff", "syslog", "quotactl", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
      "iopl", "ioperm", "vhangup", "lookup_dcookie", NULL},
     "administration of the machine"},
};

static const char *arch_name(uint32_t arch) {
  switch (arch) {
  case SCMP_ARCH_X86_64:
    return "SCMP_ARCH_X86_64";
  case SCMP_ARCH_AARCH64:
    return "SCMP_ARCH_AARCH64";
  default:
    return NULL;
  }
}

cJSON *seccomp_policy(mcp_error_t *err) {
  uint32_t arch = seccomp_arch_native();
  const char *an = arch_name(arch);
  if (an == NULL) {
    mcp_fail(err, MCP_ERR_INTERNAL, ENOTSUP, "seccomp: gVisor does not run on this architecture");
    return NULL;
  }
  cleanup_cjson cJSON *sc = cJSON_CreateObject();
  if (sc == NULL)
    goto oom;
  cJSON_AddStringToObject(sc, "defaultAction", "SCMP_ACT_ALLOW");
  cJSON *archs = cJSON_AddArrayToObject(sc, "architectures");
  cJSON_AddItemToArray(archs, cJSON_CreateString(an));
  cJSON *calls = cJSON_AddArrayToObject(sc, "syscalls");
  if (calls == NULL)
    goto oom;
  for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
    cJSON *rule = cJSON_CreateObject();
    cJSON *names = cJSON_AddArrayToObject(rule, "names");
    for (const char *const *n = rules[i].names; *n != NULL; n++) {
      /* Only names this architecture has (libseccomp knows every table). */
      if (seccomp_syscall_resolve_name_arch(arch, *n) < 0)
        continue;
      cJSON_AddItemToArray(names, cJSON_CreateString(*n));
    }
    cJSON_AddStringToObject(rule, "action", "SCMP_ACT_ERRNO");
    cJSON_AddNumberToObject(rule, "errnoRet", EPERM);
    cJSON_AddStringToObject(rule, "comment", rules[i].why);
    if (cJSON_GetArraySize(names) == 0)
      cJSON_Delete(rule);
    else
      cJSON_AddItemToArray(calls, rule);
  }
  return steal_pointer(&sc);
oom:
  mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "seccomp policy");
  return NULL;
}
