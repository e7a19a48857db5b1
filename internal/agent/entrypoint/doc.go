// Package entrypoint is the first process of a container sandbox (seed
// 003): `fleetlift-agent entrypoint [--user NAME|UID[:GID]] [--workdir DIR]
// -- ARGS...`. A container starts it as root with only CAP_CHOWN,
// CAP_SETUID, CAP_SETGID, CAP_FOWNER and CAP_DAC_OVERRIDE, and it
//
//   - removes the control plane's variables from the environment: what
//     the worker uses to reach Temporal, the container engine, the
//     cluster or itself (see Stripped), while keeping the agent's own
//     settings and credentials, which the agent hides from every command
//     it runs by itself;
//   - makes the working directory (AGENT_WORKDIR, default /workspace) and
//     the agent user's home exist and belong to that user: a volume
//     mounted there starts out owned by root;
//   - changes to the working directory and drops to the agent user
//     (AGENT_USER, default "agent", else uid and gid 1000 when the image
//     has no such user, so any tool image works): only the user's groups,
//     its gid and uid, no capability left (permitted, effective,
//     inheritable, ambient; the bounding set too when CAP_SETPCAP allows
//     clearing it) and no_new_privs, then checks that all of it stuck;
//   - executes /proc/self/exe with ARGS (typically `serve --workspace
//     /workspace`), so the agent replaces it as PID 1 with the sanitized
//     environment.
//
// Started as a user other than root (a Kubernetes pod with runAsUser), it
// cannot switch users: it stays that user and does the rest.
//
// With the five capabilities above and no CAP_SETPCAP, the bounding set
// keeps those five after the switch. They cannot come back: the agent
// runs with no capability in any other set, as a user other than root,
// under no_new_privs, so no program it executes gains any. A container
// that also has CAP_SETPCAP leaves the agent an empty bounding set.
//
// entrypoint imports only the standard library and golang.org/x/sys: it
// runs before anything else in the sandbox and must not depend on the
// agent, git, forges, Temporal or the sandbox providers.
package entrypoint
