package procrunner

import (
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// CheckHistory runs p's own history check on ops (a panic in it is a
// violation with its stack); ok is false when p has none, and porcupine's
// linearizability check per key is the one to run.
func CheckHistory(p protocolapi.Protocol, ops []checker.Op) (violations []string, ok bool) {
	if p.CheckHistory == nil {
		return nil, false
	}
	if err := guard("CheckHistory", func() error { violations = p.CheckHistory(ops); return nil }); err != nil {
		violations = append(violations, err.Error())
	}
	return violations, true
}
