package tcp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// LoadTLS builds a mutual-TLS config from PEM files: this node's
// certificate and key, and the CA that signs every node's certificate. The
// certificate must be valid for the addresses peers dial (IP or DNS SANs)
// and for both server and client authentication.
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("tcp: mutual TLS needs a certificate, a key and a CA file")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tcp: loading certificate %s with key %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tcp: reading CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tcp: CA file %s holds no PEM certificate", caFile)
	}
	// Check the chain now: a node whose certificate the CA did not sign
	// would otherwise only learn it from its peers' rejections.
	if cert.Leaf != nil {
		inter := x509.NewCertPool()
		for _, der := range cert.Certificate[1:] {
			if c, err := x509.ParseCertificate(der); err == nil {
				inter.AddCert(c)
			}
		}
		opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		if _, err := cert.Leaf.Verify(opts); err != nil {
			return nil, fmt.Errorf("tcp: certificate %s does not verify against CA %s: %w", certFile, caFile, err)
		}
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// serverTLS is the acceptor's side of cfg: client certificates required
// and verified, whatever cfg says.
func serverTLS(cfg *tls.Config) *tls.Config {
	s := cfg.Clone()
	s.ClientAuth = tls.RequireAndVerifyClientCert
	if s.ClientCAs == nil {
		s.ClientCAs = s.RootCAs
	}
	if s.MinVersion == 0 {
		s.MinVersion = tls.VersionTLS12
	}
	return s
}

// clientTLS is the dialer's side of cfg for addr: the server name defaults
// to the host dialed, so the peer's certificate must name its address.
func clientTLS(cfg *tls.Config, addr string) *tls.Config {
	c := cfg.Clone()
	if c.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			c.ServerName = host
		}
	}
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}
