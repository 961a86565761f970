package scenarios

import (
	"testing"

	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/protocols"
)

// testRegistry is the CLI's registry: the figures find SEL and GAM in it
// by name.
func testRegistry(t testing.TB) *protocolapi.Registry {
	t.Helper()
	reg, err := protocols.Registry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
