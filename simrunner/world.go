package simrunner

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocolapi"
)

// World is the simulated run of a registered protocol whose nodes own
// their simulated world (sim.World, sim.NodeEnv) rather than acting
// through roles on this runner's Env: ScaleStore's actors, SELCC's line
// caches, the index designs' clients and servers. It builds that world
// from cfg and drives it with this package's pieces (Workers, Crashes,
// Elastic, sim.Drive, the violation log); its protocol's registration
// (package protocols) gives it, and RunWorld runs it after the checks
// every protocol gets, so that `scalestore sim` runs every protocol
// through this package. A world reports what only it counts (cache hits,
// SELCC's handovers, the index's scans) as Result.Counters.
type World interface {
	RunWorld(cfg Config) (Result, error)
}

// CheckWorld says why p, run by its own world, cannot run cfg: what
// p.Supports does not list, a mutant or an option p does not have. The
// world checks the rest of cfg against its own model.
func CheckWorld(p protocolapi.Protocol, cfg Config) error {
	w := cfg.Workload
	if w == "" {
		w = protocolapi.WorkloadRegister
	}
	switch {
	case !p.Supports.Workload(w):
		return fmt.Errorf("protocol %s does not support the %s workload (it supports %v)", p.Name, w, p.Supports.Workloads)
	case cfg.Crashes < 0:
		return fmt.Errorf("--crashes %d: want at least 0", cfg.Crashes)
	case cfg.Crashes > 0 && !p.Supports.Crashes:
		return fmt.Errorf("protocol %s does not support node crashes", p.Name)
	case cfg.Elastic && !p.Supports.Elastic:
		return fmt.Errorf("protocol %s does not support elastic membership", p.Name)
	}
	_, err := p.WithDefaults(protocolapi.Config{Mutant: cfg.Mutant, Options: cfg.Options})
	return err
}

// RunWorld runs one seed of p, whose nodes own their world w: cfg's
// options completed with p's defaults, after CheckWorld.
func RunWorld(p protocolapi.Protocol, w World, cfg Config) (Result, error) {
	if cfg.Workload == "" {
		cfg.Workload = protocolapi.WorkloadRegister
	}
	if err := CheckWorld(p, cfg); err != nil {
		return Result{Seed: cfg.Seed}, err
	}
	pcfg, err := p.WithDefaults(protocolapi.Config{Mutant: cfg.Mutant, Options: cfg.Options})
	if err != nil {
		return Result{Seed: cfg.Seed}, err
	}
	cfg.Options = pcfg.Options
	return w.RunWorld(cfg)
}

// Runner is how one seed of p runs: the generic runner (Run) for a
// protocol with Deploy, its world's (RunWorld) for one with a World, or
// an error for a protocol with neither.
func Runner(p protocolapi.Protocol, w World) (func(Config) (Result, error), error) {
	switch {
	case p.Deploy != nil:
		return func(cfg Config) (Result, error) { return Run(p, cfg) }, nil
	case w != nil:
		return func(cfg Config) (Result, error) { return RunWorld(p, w, cfg) }, nil
	}
	return nil, fmt.Errorf("protocol %s has neither Deploy nor a simulated world of its own", p.Name)
}
