package sandbox

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var memorySuffixes = []struct {
	suffix string
	factor float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseMemory parses a byte quantity as Kubernetes writes one: a number
// with an optional binary (Ki, Mi, Gi, Ti) or decimal (k, M, G, T)
// suffix, such as 512Mi or 4Gi.
func ParseMemory(s string) (int64, error) {
	num, factor := s, 1.0
	for _, m := range memorySuffixes {
		if strings.HasSuffix(s, m.suffix) {
			num, factor = strings.TrimSuffix(s, m.suffix), m.factor
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("want a positive number of bytes such as 512Mi or 4Gi")
	}
	bytes := v * factor
	if bytes > math.MaxInt64/2 {
		return 0, fmt.Errorf("too large")
	}
	return int64(bytes), nil
}

// ParseCPU parses a number of CPUs, "2", "0.5" or "500m", into
// nanoCPUs: 10m to 1000 CPUs.
func ParseCPU(s string) (int64, error) {
	num, factor := s, 1e9
	if strings.HasSuffix(s, "m") {
		num, factor = strings.TrimSuffix(s, "m"), 1e6
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("want a positive number of CPUs such as 2, 0.5 or 500m")
	}
	nano := v * factor
	if nano < 1e7 || nano > 1e12 {
		return 0, fmt.Errorf("out of range: want 10m to 1000 CPUs")
	}
	return int64(nano), nil
}
