package scenarios

import (
	"testing"

	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/protocols"
)

// testRegistry is the CLI's registry, with GAM's two registrations added
// when the list of registrations does not hold them yet.
func testRegistry(t testing.TB) *protocolapi.Registry {
	t.Helper()
	reg, err := protocols.Registry()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range gam.Protocols() {
		if _, ok := reg.Lookup(p.Name); !ok {
			if err := reg.Register(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	return reg
}
