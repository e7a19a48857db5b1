package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"
)

func TestHandler(t *testing.T) {
	cache := fstest.MapFS{
		"golang.org/x/sys/@v/v0.49.0.mod":                {Data: []byte("module golang.org/x/sys\n")},
		"golang.org/x/sys/@v/v0.49.0.zip":                {Data: []byte("PK")},
		"github.com/!burnt!sushi/toml/@v/v1.4.0.info":    {Data: []byte(`{"Version":"v1.4.0"}`)},
		"github.com/!burnt!sushi/toml/@v/v1.4.0.ziphash": {Data: []byte("h1:x")},
	}
	tests := []struct {
		name, method, path string
		want               int
		body               string
	}{
		{"a .mod file", "GET", "/golang.org/x/sys/@v/v0.49.0.mod", 200, "module golang.org/x/sys\n"},
		{"a .zip file", "GET", "/golang.org/x/sys/@v/v0.49.0.zip", 200, "PK"},
		{"an escaped module path", "GET", "/github.com/!burnt!sushi/toml/@v/v1.4.0.info", 200, `{"Version":"v1.4.0"}`},
		{"HEAD", "HEAD", "/golang.org/x/sys/@v/v0.49.0.mod", 200, ""},
		{"a version the cache lacks", "GET", "/golang.org/x/sys/@v/v0.50.0.mod", 404, ""},
		{"a directory", "GET", "/golang.org/x/sys/@v/", 404, ""},
		{"the root", "GET", "/", 404, ""},
		{"out of the directory", "GET", "/../../etc/passwd", 404, ""},
		{"a write", "PUT", "/golang.org/x/sys/@v/v0.49.0.mod", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			handler(cache).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.want {
				t.Fatalf("%s %s: status %d, want %d", tt.method, tt.path, rec.Code, tt.want)
			}
			if tt.want == http.StatusOK && rec.Body.String() != tt.body {
				t.Fatalf("%s %s: body %q, want %q", tt.method, tt.path, rec.Body.String(), tt.body)
			}
		})
	}
}
