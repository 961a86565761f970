package resp

import (
	"net"
	"strings"
	"testing"
)

// hostIP is an address of this host other than loopback, if it has one.
func hostIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// A server on all interfaces without a password answers a client that
// comes from another address than loopback with -DENIED, and serves it
// once protected mode is off or a password is set; loopback clients are
// always served.
func TestProtectedMode(t *testing.T) {
	s := &Server{protected: true}
	for _, c := range []struct {
		addr string
		deny bool
	}{{"127.0.0.1:5000", false}, {"[::1]:5000", false}, {"10.1.2.3:5000", true}, {"[2001:db8::1]:5000", true}} {
		a, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.denied(a); got != c.deny {
			t.Fatalf("%s: denied %v, want %v", c.addr, got, c.deny)
		}
	}
	ip := hostIP(t)
	if ip == "" {
		t.Skip("no address but loopback on this host: the network part needs one")
	}
	for _, cfg := range []Config{{}, {Unprotected: true}, {Password: "pw"}} {
		cfg.Addr = "0.0.0.0:0"
		srv, _ := startServer(t, cfg)
		_, port, _ := net.SplitHostPort(srv.Addr())
		remote := dialRaw(t, net.JoinHostPort(ip, port))
		remote.send(cmd("PING"))
		r, err := remote.read()
		switch {
		case cfg.Password != "":
			if err != nil || !strings.HasPrefix(string(r.Raw), "-NOAUTH") {
				t.Fatalf("with a password: %q %v", r.Raw, err)
			}
		case cfg.Unprotected:
			if err != nil || string(r.Raw) != "+PONG\r\n" {
				t.Fatalf("unprotected: %q %v", r.Raw, err)
			}
		default:
			if err != nil || !strings.HasPrefix(string(r.Raw), "-DENIED Redis is running in protected mode") {
				t.Fatalf("protected, from %s: %q %v", ip, r.Raw, err)
			}
			remote.expectClosed()
			local := dialRaw(t, net.JoinHostPort("127.0.0.1", port))
			local.send(cmd("PING"))
			local.expect("+PONG\r\n")
		}
	}
}
