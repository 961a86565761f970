package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
)

// ScaleStore's options (protocolapi.Option, `sim --opt name=value`): its
// registration declares them, with the flags of `scalestore sim` that
// set them too, and applyOptions reads them.
const (
	// OptionConflict is its conflict handling: chaining (the paper's),
	// fifo or polling (its baselines); `sim --protocol fifo` sets it.
	OptionConflict = "conflict"
	// OptionReplicas is SimConfig.Replicas.
	OptionReplicas = "replicas"
	// OptionComputeNodes is SimConfig.ComputeNodes.
	OptionComputeNodes = "compute-nodes"
	// OptionPartitioned (on or off) is SimConfig.Partitioned.
	OptionPartitioned = "partitioned"
	// OptionMessageBudget is SimConfig.MessageBudget.
	OptionMessageBudget = "message-budget"
	// OptionDoubleFaults (on or off) is SimConfig.DoubleFaults.
	OptionDoubleFaults = "double-faults"
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
// registered protocol it runs. A value that does not parse, or an option
// the protocol does not have, is an error.
func (c *SimConfig) applyOptions() error {
	if len(c.Options) == 0 {
		return nil
	}
	l, err := c.loop()
	if err != nil {
		return err
	}
	known := l.options
	headNodes := true
	for _, name := range slices.Sorted(maps.Keys(c.Options)) {
		v := c.Options[name]
		if !slices.Contains(known, name) {
			return fmt.Errorf("protocol %s has no option %q (it has %v)", c.Registered(), name, known)
		}
		var err error
		atLeast := func(dst *int, least int) {
			if *dst, err = strconv.Atoi(v); err == nil && *dst < least {
				err = fmt.Errorf("want at least %d", least)
			}
		}
		switch name {
		case selcc.OptionMemoryNodes: // the index designs' too
			atLeast(&c.MemoryNodes, 1)
		case selcc.OptionGamma:
			c.Gamma, err = strconv.ParseFloat(v, 64)
			if c.Gamma <= 0 {
				c.Gamma = -1 // 0 or below: no lease
			}
		case selcc.OptionPriority:
			var on bool
			on, err = onOff(v)
			c.NoPriority = !on
		case indexdesign.OptionScanLen:
			atLeast(&c.NAMScanLen, 1)
		case indexdesign.OptionCellSearch:
			c.CellSearch = v
		case indexdesign.OptionCellCacheLevel:
			atLeast(&c.CellCacheLevel, 0)
		case indexdesign.OptionCellMegaNodes:
			atLeast(&c.CellMegaNodes, 0)
		case indexdesign.OptionHeadNodes:
			headNodes, err = onOff(v)
		case indexdesign.OptionHeadGroup:
			if c.NAMHeadGroup, err = strconv.Atoi(v); err == nil && (c.NAMHeadGroup < 2 || c.NAMHeadGroup > 29) {
				err = fmt.Errorf("want 2..29")
			}
		case OptionConflict:
			c.Protocol, err = protocol.ParseVariant(v)
		case OptionReplicas:
			atLeast(&c.Replicas, 1)
		case OptionComputeNodes:
			atLeast(&c.ComputeNodes, 0)
		case OptionPartitioned:
			c.Partitioned, err = onOff(v)
		case OptionMessageBudget:
			c.MessageBudget, err = strconv.ParseFloat(v, 64)
		case OptionDoubleFaults:
			c.DoubleFaults, err = onOff(v)
		}
		if err != nil {
			return fmt.Errorf("option %s=%s: %w", name, v, err)
		}
	}
	if !headNodes {
		c.NAMHeadGroup = 0
	}
	return nil
}

// onOff parses an on/off option (true and false too).
func onOff(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "true":
		return true, nil
	case "off", "false":
		return false, nil
	}
	return false, fmt.Errorf("want on or off")
}
