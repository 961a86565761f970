//go:build !linux

package resp

// loopSupported: no epoll here; every connection has a goroutine.
const loopSupported = false

type eventLoop struct{}

func (s *Server) startLoops() error   { return nil }
func (s *Server) stopLoops()          {}
func (s *Server) toLoop(*client)      {}
func (s *Server) loopClients() string { return "" }
