package entrypoint

import (
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestResolve(t *testing.T) {
	sandbox := os.DirFS("testdata/sandbox") // fleetlift's sandbox image: user agent
	node := os.DirFS("testdata/node")       // a tool image whose uid 1000 is node
	scratch := fstest.MapFS{}               // no /etc/passwd at all
	tests := []struct {
		name    string
		image   fs.FS
		spec    string
		want    Account
		wantErr string
	}{
		{name: "default is the agent user", image: sandbox, spec: "",
			want: Account{Name: "agent", UID: 1000, GID: 1000, Groups: []int{1000, 1500, 50}, Home: "/home/agent"}},
		{name: "by name", image: sandbox, spec: "agent",
			want: Account{Name: "agent", UID: 1000, GID: 1000, Groups: []int{1000, 1500, 50}, Home: "/home/agent"}},
		{name: "by uid, an entry whose home is /nonexistent", image: sandbox, spec: "65534",
			want: Account{Name: "nobody", UID: 65534, GID: 65534, Groups: []int{65534}, Home: DefaultHome}},
		{name: "an entry whose home is /", image: sandbox, spec: "daemon2",
			want: Account{Name: "daemon2", UID: 1004, GID: 1004, Groups: []int{1004}, Home: DefaultHome}},
		{name: "uid:gid keeps only that group", image: sandbox, spec: "1000:1500",
			want: Account{Name: "agent", UID: 1000, GID: 1500, Groups: []int{1500}, Home: "/home/agent"}},
		{name: "uid the image lacks", image: sandbox, spec: "4242",
			want: Account{UID: 4242, GID: 4242, Groups: []int{4242}, Home: DefaultHome}},
		{name: "uid:gid the image lacks", image: sandbox, spec: "4242:4343",
			want: Account{UID: 4242, GID: 4343, Groups: []int{4343}, Home: DefaultHome}},
		{name: "entry without a home", image: sandbox, spec: "nohome",
			want: Account{Name: "nohome", UID: 1002, GID: 1002, Groups: []int{1002}, Home: DefaultHome}},
		{name: "tool image: the default falls back to its uid 1000", image: node, spec: "",
			want: Account{Name: "node", UID: 1000, GID: 1000, Groups: []int{1000}, Home: "/home/node"}},
		{name: "image without /etc/passwd: the default is 1000:1000", image: scratch, spec: "",
			want: Account{UID: 1000, GID: 1000, Groups: []int{1000}, Home: DefaultHome}},
		{name: "image without /etc/passwd: uid:gid", image: scratch, spec: "2000:3000",
			want: Account{UID: 2000, GID: 3000, Groups: []int{3000}, Home: DefaultHome}},

		{name: "name the image lacks", image: node, spec: "agent", wantErr: `user "agent" is not in the image's /etc/passwd`},
		{name: "root by name", image: sandbox, spec: "root", wantErr: "never runs as root"},
		{name: "root by uid", image: sandbox, spec: "0", wantErr: "never runs as root"},
		{name: "root's group as gid", image: sandbox, spec: "1000:0", wantErr: "group 0"},
		{name: "root's group as primary group", image: sandbox, spec: "wheel", wantErr: "group 0"},
		{name: "root's group as supplementary group", image: sandbox, spec: "sudoer", wantErr: "group 0"},
		{name: "name:gid", image: sandbox, spec: "agent:1000", wantErr: "want NAME, UID or UID:GID"},
		{name: "gid not a number", image: sandbox, spec: "1000:x", wantErr: "not a user or group id"},
		{name: "uid out of range", image: sandbox, spec: "4294967295", wantErr: "not a user or group id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.image, tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) = %+v, %v; want an error containing %q", tt.spec, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.spec, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Resolve(%q)\n got %+v\nwant %+v", tt.spec, got, tt.want)
			}
		})
	}
}
