// Package listen opens the TCP listeners fleetlift's commands serve on
// (metrics, webhooks, the Web UI, the gateway, the embedded Temporal
// server) and says, in one line naming the flag that chose the address,
// when that address is already taken: the usual reason a server does not
// start. FreePorts finds ports for servers that are given a number to
// bind, outside the range the kernel takes connections' source ports
// from.
//
// listen imports only the standard library.
package listen
