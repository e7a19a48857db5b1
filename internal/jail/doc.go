// Package jail runs a command fleetlift did not write (a deterministic
// transform, an agent CLI, a repository's setup or verifiers) where it
// cannot reach what the control plane trusts.
//
// On Linux a jailed command runs in new user, mount, PID, IPC, UTS and
// network namespaces, made without privileges:
//
//   - its network is its own loopback interface and nothing else: it
//     reaches no port of the host's (the control plane's Temporal, Web
//     UI, metrics and webhook listen on the host's 127.0.0.1) and no
//     other address, nor the host's abstract Unix sockets; the only ways
//     out are Spec.Forwards, ports on its loopback that the jail's init
//     relays to Unix sockets the caller names (an egress proxy);
//   - it runs in a session of its own, with no controlling terminal, and
//     its /dev is the jail's: null, zero, full, random, urandom, tty and
//     pseudo-terminals of its own, none of the host's terminals, so it
//     can neither type into nor write to the operator's;
//   - the whole file system is read-only but for Spec.Writable (the
//     workspace and the sandbox's home) and a private, empty /tmp;
//   - Spec.Hidden (the protocol directory, the worker's state directory,
//     credentials in the worker's home) are replaced by empty read-only
//     directories or files, except for Spec.Readable paths under them;
//   - /proc shows only the command's own processes, so no other process's
//     environment or memory can be read;
//   - it runs with the caller's uid and gid and no capabilities, under
//     no_new_privs, so it can neither undo the mounts above nor gain
//     privileges through a setuid program: a caller other than root's in
//     a mount namespace of a less privileged user namespace (its mounts
//     locked), root's with empty capability sets, the bounding set
//     included;
//   - when the command's first process exits, or the process that started
//     the jail dies, the kernel kills every process it left behind.
//
// The jail is a program that calls Main: this executable run again, or
// cmd/fleetlift-jail, which starts faster (Program finds one of this
// build in a directory). Jail.Command starts Self with
// the specification, and Main sets the namespaces up and runs the command
// as its child (it is the PID namespace's init, undumpable, so that the
// command cannot reach it through /proc). A jail that cannot be
// made says why on a pipe of its own (Cmd.SetupError), closed before the
// command starts, so that the command cannot pass for it. Check tells
// whether the kernel allows all of this.
//
// jail imports only the standard library, golang.org/x/sys and
// gomaxprocs (to carry a command's processor count into the jail).
package jail
