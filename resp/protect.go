package resp

import (
	"net"
	"time"
)

// msgDenied is what protected mode answers a client from another host
// before it closes the connection: Redis's -DENIED message, with the
// remedies this server offers.
const msgDenied = "DENIED Redis is running in protected mode because protected " +
	"mode is enabled and no password is set for the default user. " +
	"In this mode connections are only accepted from the loopback interface. " +
	"If you want to connect from external computers you " +
	"may adopt one of the following solutions: " +
	"1) Set an authentication password for the default user " +
	"(scalestore node --resp-password, ClusterOptions.RESPPassword, Config.Password). " +
	"2) Restart the node with --resp-protected-mode=false " +
	"(ClusterOptions.RESPUnprotected, Config.Unprotected), however MAKE SURE " +
	"it is not publicly accessible from internet if you do so. " +
	"NOTE: You only need to do one of the above things in order for " +
	"the server to start accepting connections from the outside."

// loopback reports whether a is an address of the loopback interface.
func loopback(a net.Addr) bool {
	var ip net.IP
	switch t := a.(type) {
	case *net.TCPAddr:
		ip = t.IP
	case *net.UnixAddr:
		return true
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return false
		}
		ip = net.ParseIP(host)
	}
	return ip != nil && ip.IsLoopback()
}

// denied reports whether protected mode refuses a client from remote:
// no password is set, protection was not turned off, and the client is
// not on this host's loopback interface.
func (s *Server) denied(remote net.Addr) bool {
	return s.protected && !s.password && remote != nil && !loopback(remote)
}

// deny answers a client protected mode refuses and closes it.
func (s *Server) deny(nc net.Conn) {
	defer s.wg.Done()
	defer s.untrack(nc)
	s.errors.Add(1)
	s.rejected.Add(1)
	s.log.Warn("resp: protected mode refused a client from another host", "remote", nc.RemoteAddr().String())
	nc.SetDeadline(time.Now().Add(time.Second))
	nc.Write([]byte("-" + msgDenied + "\r\n"))
	lingerClose(nc)
}
