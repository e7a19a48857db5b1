package devserver_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
)

// recordLookups makes every DNS query of this process fail and records
// the name it asked for, until the test ends. Names in /etc/hosts
// (localhost) are answered from there as before, without a query.
func recordLookups(t *testing.T) func() []string {
	t.Helper()
	var mu sync.Mutex
	var names []string
	was := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(_ context.Context, _, address string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			buf := make([]byte, 1024)
			n, _ := server.Read(buf)
			// A connection that is not a PacketConn gets the query as
			// over TCP: after its length.
			msg := buf[:n]
			if len(msg) > 2 {
				msg = msg[2:]
			}
			mu.Lock()
			names = append(names, queryName(msg)+" (to "+address+")")
			mu.Unlock()
		}()
		return client, nil
	}}
	t.Cleanup(func() { net.DefaultResolver = was })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), names...)
	}
}

// queryName is the name a DNS query message asks for.
func queryName(msg []byte) string {
	const header = 12
	var labels []string
	for i := header; i < len(msg); {
		n := int(msg[i])
		if n == 0 || i+1+n > len(msg) {
			break
		}
		labels = append(labels, string(msg[i+1:i+1+n]))
		i += 1 + n
	}
	if len(labels) == 0 {
		return "(unreadable query)"
	}
	return strings.Join(labels, ".")
}
