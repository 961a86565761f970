package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/protocol/selcc"
)

// Registered is the registered name of the protocol cfg runs (package
// protocols): an index design when the workload is one, else System, else
// ScaleStore.
func (c SimConfig) Registered() string {
	switch {
	case IsNAMWorkload(c.Workload):
		return c.Workload
	case c.System != "":
		return c.System
	}
	return SystemScaleStore
}

// applyOptions sets cfg's fields from Options, the options of the
// registered protocol it runs (their names are declared by its package:
// selcc.Option*, indexdesign.OptionMemoryNodes). A value that does not
// parse, or an option the protocol does not have, is an error.
func (c *SimConfig) applyOptions() error {
	if len(c.Options) == 0 {
		return nil
	}
	var known []string
	switch {
	case IsNAMWorkload(c.Workload):
		known = []string{indexdesign.OptionMemoryNodes}
	case c.System == SystemSELCC:
		known = []string{selcc.OptionMemoryNodes, selcc.OptionGamma, selcc.OptionPriority}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Options)) {
		v := c.Options[name]
		if !slices.Contains(known, name) {
			return fmt.Errorf("protocol %s has no option %q (it has %v)", c.Registered(), name, known)
		}
		var err error
		switch name {
		case selcc.OptionMemoryNodes: // the index designs' too
			c.MemoryNodes, err = strconv.Atoi(v)
			if err == nil && c.MemoryNodes < 1 {
				err = fmt.Errorf("want at least 1")
			}
		case selcc.OptionGamma:
			c.Gamma, err = strconv.ParseFloat(v, 64)
			if c.Gamma <= 0 {
				c.Gamma = -1 // 0 or below: no lease
			}
		case selcc.OptionPriority:
			switch strings.ToLower(v) {
			case "on", "true":
				c.NoPriority = false
			case "off", "false":
				c.NoPriority = true
			default:
				err = fmt.Errorf("want on or off")
			}
		}
		if err != nil {
			return fmt.Errorf("option %s=%s: %w", name, v, err)
		}
	}
	return nil
}
