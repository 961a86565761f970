package tcp

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// suiteBug is a line of transporttest's OneSided test that slices a
// 4000-byte slice to 4096 bytes and panics for every transport. Until the
// suite is fixed, TestMain skips that one subtest (TestOneSidedPage runs
// the same checks with a whole page); once the line is gone the suite's own
// subtest runs again.
const suiteBug = `bytes.Repeat([]byte("scalestore"), 400)[:protocol.PageSize]`

func TestMain(m *testing.M) {
	flag.Parse()
	src, err := os.ReadFile("../transporttest/transporttest.go")
	if err == nil && strings.Contains(string(src), suiteBug) && flag.Lookup("test.skip").Value.String() == "" {
		fmt.Fprintln(os.Stderr, "tcp: transporttest's OneSided slices past its page (4000 of 4096 bytes); skipping that subtest, TestOneSidedPage stands in")
		flag.Set("test.skip", "^TestConformance(TLS)?$/^OneSided$")
	}
	os.Exit(m.Run())
}
