package protocolapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

type ping struct{ n uint8 }

func (p ping) Type() uint8    { return 1 }
func (p ping) String() string { return fmt.Sprintf("ping n=%d", p.n) }

type pingCodec struct{}

func (pingCodec) MessageTypes() []string { return []string{"Ping"} }
func (pingCodec) Encode(m Message, body []byte) ([]byte, error) {
	body[0] = m.(ping).n
	return []byte{m.(ping).n}, nil
}
func (pingCodec) Decode(t uint8, body, payload []byte) (Message, error) {
	if len(payload) != 1 || payload[0] != body[0] {
		return nil, errors.New("payload does not match")
	}
	return ping{body[0]}, nil
}

func TestFrameRoundTripAndRefusals(t *testing.T) {
	c := pingCodec{}
	if err := RoundTrip(c, ping{7}); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, protocol.FrameSize)
	payload, err := EncodeFrame(c, frame, 3, 4, ping{9})
	if err != nil {
		t.Fatal(err)
	}
	if TypeName(c, frame) != "Ping" {
		t.Fatalf("type name %q", TypeName(c, frame))
	}
	for name, mutate := range map[string]func(f, p []byte) ([]byte, []byte){
		"magic":   func(f, p []byte) ([]byte, []byte) { f[0] = 0xA5; return f, p },
		"type":    func(f, p []byte) ([]byte, []byte) { f[1] = 2; return f, p },
		"size":    func(f, p []byte) ([]byte, []byte) { return f[:10], p },
		"payload": func(f, p []byte) ([]byte, []byte) { return f, nil },
	} {
		f := append([]byte(nil), frame...)
		f, p := mutate(f, append([]byte(nil), payload...))
		if _, _, _, err := DecodeFrame(c, f, p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	if _, err := EncodeFrame(c, frame, 0, 1, nil); err == nil {
		t.Error("nil message encoded")
	}
}

type manyTypes struct{ pingCodec }

func (manyTypes) MessageTypes() []string { return make([]string, 256) }

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	deploy := func(Config) (Cluster, error) { return nil, nil }
	for _, name := range []string{"zeta", "alpha", "mid-1"} {
		var c Codec = pingCodec{}
		if name == "zeta" {
			c = nil // a protocol of verbs only sends no message
		}
		if err := r.Register(Protocol{Name: name, Codec: c, Deploy: deploy}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register(Protocol{Name: "alpha", BuiltIn: "x"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate: %v", err)
	}
	for _, bad := range []Protocol{{Name: ""}, {Name: "Up", BuiltIn: "x"}, {Name: "nothing"}, {Name: "toomany", Deploy: deploy, Codec: manyTypes{}},
		{Name: "m", BuiltIn: "x", Mutants: []Mutant{{Name: "a"}, {Name: "a"}}},
		{Name: "f", BuiltIn: "x", Options: []Option{{Name: "priority", Default: "on", FlagValue: "off"}}}} { // a flag value without its flag
		if err := r.Register(bad); err == nil {
			t.Errorf("registered %+v", bad)
		}
	}
	var names []string
	for _, p := range r.All() {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "alpha,mid-1,zeta" {
		t.Fatalf("All: %v", names)
	}
	if _, ok := r.Lookup("mid-1"); !ok {
		t.Fatal("Lookup")
	}
	if _, err := r.Find("nope"); err == nil || !strings.Contains(err.Error(), "alpha, mid-1, zeta") {
		t.Fatalf("Find: %v", err)
	}
}
