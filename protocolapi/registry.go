package protocolapi

import (
	"fmt"
	"slices"
	"strings"
)

// Registry holds protocols by name. It is filled once, at start-up, from
// the one list of registrations (package protocols), and then only read;
// it is not safe for concurrent Register.
type Registry struct {
	byName map[string]Protocol
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]Protocol{}} }

// Register adds p, refusing an invalid protocol or a name taken.
func (r *Registry) Register(p Protocol) error {
	if err := p.validate(); err != nil {
		return err
	}
	if _, ok := r.byName[p.Name]; ok {
		return fmt.Errorf("protocolapi: protocol %q registered twice", p.Name)
	}
	r.byName[p.Name] = p
	return nil
}

// Lookup returns the protocol registered as name.
func (r *Registry) Lookup(name string) (Protocol, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// Find is Lookup with an error that lists the names there are.
func (r *Registry) Find(name string) (Protocol, error) {
	if p, ok := r.byName[name]; ok {
		return p, nil
	}
	return Protocol{}, fmt.Errorf("unknown protocol %q (registered: %s)", name, strings.Join(r.Names(), ", "))
}

// All returns every protocol, sorted by name.
func (r *Registry) All() []Protocol {
	out := make([]Protocol, 0, len(r.byName))
	for _, p := range r.byName {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Protocol) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names returns every protocol's name, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.byName))
	for name := range r.byName {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
