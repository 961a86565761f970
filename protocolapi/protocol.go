package protocolapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
)

// Workloads a protocol can support (Supports.Workloads).
const (
	// WorkloadRegister: keys as registers, reads and blind writes.
	WorkloadRegister = "register"
	// WorkloadRMW: every write reads first (OpRMW), so a lost update is a
	// violation.
	WorkloadRMW = "rmw"
	// WorkloadBTree: an ordered index over the protocol's pages, for a
	// protocol whose blocking workers are a Tree.
	WorkloadBTree = "btree"
)

// Supports says what a protocol can be run with. The runner refuses the
// rest with a reason.
type Supports struct {
	// Workloads lists the workloads it runs (Workload* constants).
	Workloads []string
	// Crashes: nodes may crash and restart during a run (a Cluster with
	// Deploy implements Crashable).
	Crashes bool
	// Elastic: compute nodes may join and leave during a run (a Cluster
	// with Deploy implements Leaver).
	Elastic bool
	// Processes: a built-in protocol (no Deploy) runs on real processes
	// over a transport, through its own cluster code. A protocol with
	// Deploy need not set it: the process runner (procrunner, `scalestore
	// cluster --protocol NAME`) runs every one, since a role acts only
	// through its Env, and `scalestore protocols` lists it so.
	Processes bool
}

// Workload reports whether it supports the named workload.
func (s Supports) Workload(name string) bool { return slices.Contains(s.Workloads, name) }

func (s Supports) String() string {
	out := fmt.Sprintf("workloads=%v", s.Workloads)
	for _, f := range []struct {
		on   bool
		name string
	}{{s.Crashes, "crashes"}, {s.Elastic, "elastic"}, {s.Processes, "processes"}} {
		if f.on {
			out += " " + f.name
		}
	}
	return out
}

// Mutant is a named break of one protocol rule: the runner's checks must
// catch it within a swarm. The protocol applies it itself when
// Config.Mutant names it (no process-wide switch, so runs of mutants and
// of the protocol may go on side by side), drawing from Env.Rand when it
// fires only sometimes.
type Mutant struct {
	Name string
	// About says which rule it breaks and which check should catch it.
	About string
	// Workload is the workload whose checks catch it ("": register).
	Workload string
}

// Scenario is a small scripted run of a protocol, charted message by
// message (a conflict to teach or to look at).
type Scenario struct {
	Name, About string
	// The deployment: Config's fields of the same names.
	Nodes, Workers, Keys, CacheLines int
	// Script is the accesses, each issued by its worker once the worker's
	// previous access completed and not before At.
	Script []ScriptOp
	// Watch is the key whose state the chart shows after every step
	// (Cluster.KeyState), or -1.
	Watch int
}

// ScriptOp is one access of a Scenario. A write's value is chosen by the
// runner (unique in the run).
type ScriptOp struct {
	At     int64 // ns of simulated time, at the earliest
	Node   protocol.NodeID
	Worker int
	Kind   OpKind
	Key    uint64
}

// Config is one deployment of a protocol: what Deploy gets.
type Config struct {
	// Nodes is how many nodes run workers; Workers how many a node runs.
	// A protocol may add nodes of its own (memory servers): Layout.Nodes.
	Nodes, Workers int
	// Keys is how many keys the workload accesses (0..Keys-1).
	Keys int
	// CacheLines bounds each node's cache, in keys (0: the protocol's
	// default); a small cache forces evictions during conflicts.
	CacheLines int
	// Mutant is the name of one of Protocol.Mutants to apply, or "".
	Mutant string
	// Options holds a value for every one of Protocol.Options (the runner
	// fills in the defaults); read them with Option.
	Options map[string]string
}

// Option returns the value of the protocol's option name ("" if unset).
func (c Config) Option(name string) string { return c.Options[name] }

// Option is a protocol's own parameter (a mode, a count of memory nodes),
// set on the command line with --opt name=value.
type Option struct {
	Name, Default, About string
	// Flag, when set, is a flag of `scalestore sim` that sets the option
	// too: a flag older than the option, kept working for the protocol
	// that declares it (the command line learns it from here, so that it
	// names no protocol's flags). --Flag=v sets the option to v; with
	// FlagValue set, Flag is a boolean flag that, given, sets it to
	// FlagValue (--no-priority: priority=off).
	Flag, FlagValue string
}

// Layout is what a deployment needs from the world before its roles are
// built.
type Layout struct {
	// Nodes is the number of nodes in the world, at least Config.Nodes:
	// nodes 0..Config.Nodes-1 run the workers, any above are the
	// protocol's own (memory servers, directories).
	Nodes int
	// Memory is, per node, the bytes of memory to register for one-sided
	// verbs (nil or 0: none). The runner allocates it 8-byte aligned and
	// zeroed and registers it before any role is built.
	Memory []int
	// SSDPages is, per node, the pages of its SSD (nil or 0: none).
	SSDPages []int
}

// Cluster is one deployed instance of a protocol: it builds the roles and
// checks their invariants. It sees every role it built (it holds them), so
// its checks can compare the nodes' states: a global view that only the
// simulator has; a process runner calls only Layout and Role.
type Cluster interface {
	Layout() Layout
	// Role builds node's role. The runner calls it once for every node
	// 0..Layout().Nodes-1, in order, after registering every node's memory.
	Role(node protocol.NodeID, env Env) (Role, error)
	// Check checks the invariants: after every step of the simulation
	// (atRest false: what holds at every instant, single writer or many
	// readers, copies equal), and once at rest when nothing is in flight
	// (atRest true: the directories agree with the nodes, nothing is
	// pending). Each error is one violation.
	Check(atRest bool) []error
}

// Keyed is implemented by a Message about one key: charts that watch a
// key show only its messages.
type Keyed interface {
	AboutKey() uint64
}

// MemoryKeyer is implemented by a Cluster whose registered memory holds
// keys: charts that watch a key show the verbs on its bytes too.
type MemoryKeyer interface {
	// KeyAt is the key whose word or data is at off of node's memory.
	KeyAt(node protocol.NodeID, off uint64) (key uint64, ok bool)
}

// Counter is one of a protocol's own counters (invalidations, fetches),
// summed over a run.
type Counter struct {
	Name  string
	Value uint64
}

// Counterer is implemented by a Cluster that counts what its protocol did:
// the runner puts the counters into its result, in the order given.
type Counterer interface {
	Counters() []Counter
}

// KeyStater is implemented by a Cluster that can describe one key's state
// across the nodes (its directory entry and copies) for charts.
type KeyStater interface {
	KeyState(key uint64) string
}

// Protocol describes one protocol to the framework: registered by name,
// listed by `scalestore protocols`, run by the generic runner (simrunner)
// when Deploy is set.
type Protocol struct {
	// Name is how the CLI and the registry know it: lower case letters,
	// digits and '-'.
	Name string
	// Summary says in one line what it is (and which paper).
	Summary string
	// Supports says what it can be run with.
	Supports Supports
	// Codec puts its messages on the wire (nil: it sends none, a protocol
	// of one-sided verbs only; or it is a built-in that uses
	// protocol.Message).
	Codec Codec
	// Deploy builds one instance for cfg. It must not draw random numbers
	// or read the clock: a run's randomness comes from Env.Rand. nil: a
	// built-in protocol whose nodes own their simulated world, which its
	// registration gives (package protocols: a simrunner.World, a type
	// this package cannot name).
	Deploy func(cfg Config) (Cluster, error)
	// BuiltIn, for a protocol without Deploy, is the flags of `scalestore
	// sim` that select its world ("--protocol chaining", "--workload
	// nam-cg"): `sim --protocol NAME` stands for them.
	BuiltIn string
	// Mutants are its named mutations.
	Mutants []Mutant
	// Options are its own parameters; Deploy reads them from Config.Options.
	Options []Option
	// Scenarios are its scripted charts.
	Scenarios []Scenario
	// CheckHistory checks a run's history when linearizability is not the
	// protocol's model (a TSO protocol): each string is one violation.
	// nil: porcupine's linearizability check per key (checker.Check).
	CheckHistory func(ops []checker.Op) []string
	// Defaults is the deployment `sim --protocol NAME` uses when the
	// command line does not say (zero fields: the runner's defaults).
	Defaults Config
}

// WithDefaults is cfg as Deploy gets it: Options holds every one of p's
// options, cfg's value or its default. A mutant or an option that p does
// not have is an error. Every runner calls it.
func (p *Protocol) WithDefaults(cfg Config) (Config, error) {
	if cfg.Mutant != "" {
		if _, ok := p.Mutant(cfg.Mutant); !ok {
			return cfg, fmt.Errorf("protocol %s has no mutant %q (it has %s)", p.Name, cfg.Mutant, strings.Join(p.MutantNames(), ", "))
		}
	}
	out := make(map[string]string, len(p.Options))
	for _, o := range p.Options {
		out[o.Name] = o.Default
	}
	for name, v := range cfg.Options {
		if _, ok := out[name]; !ok {
			names := make([]string, len(p.Options))
			for i, o := range p.Options {
				names[i] = o.Name
			}
			return cfg, fmt.Errorf("protocol %s has no option %q (it has %v)", p.Name, name, names)
		}
		out[name] = v
	}
	cfg.Options = out
	return cfg, nil
}

// Mutant returns the named mutant.
func (p *Protocol) Mutant(name string) (Mutant, bool) {
	for _, m := range p.Mutants {
		if m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}

// Scenario returns the named scenario.
func (p *Protocol) Scenario(name string) (Scenario, bool) {
	for _, s := range p.Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// MutantNames lists its mutants' names.
func (p *Protocol) MutantNames() []string {
	out := make([]string, len(p.Mutants))
	for i, m := range p.Mutants {
		out[i] = m.Name
	}
	return out
}

// validate says what is wrong with p as a registration.
func (p *Protocol) validate() error {
	if p.Name == "" {
		return fmt.Errorf("protocolapi: a protocol without a name")
	}
	for _, r := range p.Name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("protocolapi: protocol name %q: only a-z, 0-9 and '-'", p.Name)
		}
	}
	if p.Deploy == nil && p.BuiltIn == "" {
		return fmt.Errorf("protocolapi: protocol %q has neither Deploy nor a built-in run loop", p.Name)
	}
	if p.Codec != nil {
		if n := len(p.Codec.MessageTypes()); n == 0 || n > 255 {
			return fmt.Errorf("protocolapi: protocol %q: %d message types, want 1..255", p.Name, n)
		}
	}
	for _, w := range p.Supports.Workloads {
		if w != WorkloadRegister && w != WorkloadRMW && w != WorkloadBTree && p.Deploy != nil {
			return fmt.Errorf("protocolapi: protocol %q supports workload %q, which the runner does not know", p.Name, w)
		}
	}
	seen := map[string]bool{}
	for _, m := range p.Mutants {
		if m.Name == "" || seen[m.Name] {
			return fmt.Errorf("protocolapi: protocol %q: mutant %q is empty or named twice", p.Name, m.Name)
		}
		seen[m.Name] = true
	}
	clear(seen)
	for _, o := range p.Options {
		if o.Name == "" || seen[o.Name] {
			return fmt.Errorf("protocolapi: protocol %q: option %q is empty or named twice", p.Name, o.Name)
		}
		if o.FlagValue != "" && o.Flag == "" {
			return fmt.Errorf("protocolapi: protocol %q: option %q has a flag value but no flag", p.Name, o.Name)
		}
		seen[o.Name] = true
	}
	clear(seen)
	for _, s := range p.Scenarios {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("protocolapi: protocol %q: scenario %q is empty or named twice", p.Name, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
