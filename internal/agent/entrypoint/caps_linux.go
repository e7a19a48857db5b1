package entrypoint

import (
	"strconv"
	"strings"
)

// capabilityNames are the kernel's capability names, by number.
var capabilityNames = []string{
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill",
	"setgid", "setuid", "setpcap", "linux_immutable", "net_bind_service",
	"net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
	"sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
	"sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time",
	"sys_tty_config", "mknod", "lease", "audit_write", "audit_control",
	"setfcap", "mac_override", "mac_admin", "syslog", "wake_alarm",
	"block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
}

func capName(n int) string {
	if n >= 0 && n < len(capabilityNames) {
		return "cap_" + capabilityNames[n]
	}
	return "capability " + strconv.Itoa(n)
}

func capNames(ns []int) string {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = capName(n)
	}
	return strings.Join(names, ",")
}
