package giteatest

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The free port Launch picks can be taken before Gitea binds it (another
// process on the machine picks the same one): Gitea then exits with
// "address already in use", and Launch starts it again on another port
// instead of failing the suite that asked for it.
func TestLaunchTriesAgainWhenItsPortIsTaken(t *testing.T) {
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	taken := squatter.Addr().(*net.TCPAddr).Port
	var tried []int
	pickPort = func(host string) (int, error) {
		port := taken
		if len(tried) > 0 {
			var err error
			if port, err = freePort(host); err != nil {
				return 0, err
			}
		}
		tried = append(tried, port)
		return port, nil
	}
	t.Cleanup(func() { pickPort = freePort })

	dir := t.TempDir()
	s, err := Launch(Options{Dir: dir})
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		t.Fatalf("Launch with its first port taken: %v", err)
	}
	if len(tried) != 2 || tried[0] != taken {
		t.Fatalf("Launch tried ports %v; want %d (taken), then another", tried, taken)
	}
	u, err := url.Parse(s.URL())
	if err != nil || u.Port() != strconv.Itoa(tried[1]) {
		t.Errorf("Gitea serves at %s, want port %d", s.URL(), tried[1])
	}
	if got := s.admin.Token; got == "" {
		t.Error("no administrator after the second start")
	}
	var said []byte
	for _, name := range []string{"console.log", "gitea.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, "log", name))
		said = append(said, b...)
	}
	if !strings.Contains(string(said), "address already in use") {
		t.Errorf("Gitea's logs do not say the first port was taken:\n%s", said)
	}
}
