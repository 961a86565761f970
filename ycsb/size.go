package ycsb

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte size such as 1GiB, 256MiB, 64KB or 4096 (cache
// sizes on the command lines).
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size like 256MiB", s)
	}
	return n * mult, nil
}
