// Package egress is the proxy through which sandboxed work reaches the
// network, and the only way it does: a jailed command's network namespace
// holds nothing but its loopback, where the jail relays one port to this
// proxy's Unix socket on the trusted side (jail.Forward).
//
// The proxy tunnels HTTPS (CONNECT) and forwards plain HTTP requests only
// to the hosts an operator allowed (Allow; none by default), and never to
// an address on loopback, in a private, shared, link-local or multicast
// range, whatever name resolves to it: the control plane and the cluster's
// services stay out of reach. It dials the address it checked, so a name
// that resolves anew cannot slip past the check.
//
// egress imports only the standard library.
package egress
