package scenarios

import (
	"testing"

	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/sel"
)

// testRegistry holds the plug-in protocols the figures find by name (SEL
// and GAM's two modes), registered from their packages as the one list
// (package protocols) registers them: that list imports this package (the
// built-ins' worlds), so this package's tests cannot import it.
func testRegistry(t testing.TB) *protocolapi.Registry {
	t.Helper()
	reg := protocolapi.NewRegistry()
	for _, p := range []protocolapi.Protocol{sel.Protocol(), gam.ProtocolSEQ(), gam.ProtocolTSO()} {
		if err := reg.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}
