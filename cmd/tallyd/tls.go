package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"
)

// servingCert is the certificate tallyd serves TLS with, read from
// --tls-cert and --tls-key at start and again on SIGHUP (as the
// credentials file is): a handshake uses the certificate in force when it
// starts, so a renewed certificate (cert-manager, certbot) takes effect
// without a restart.
type servingCert struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// loadServingCert reads the key pair, refusing a pair that does not parse
// or does not match, naming both files.
func loadServingCert(certFile, keyFile string) (*servingCert, error) {
	s := &servingCert{certFile: certFile, keyFile: keyFile}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads the key pair again; on any problem the certificate in force
// stays and the problem is returned. A certificate outside its validity
// period (expired, or not valid yet) is such a problem: every client
// would refuse it.
func (s *servingCert) reload() error {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err == nil {
		err = checkValidity(cert.Leaf, time.Now())
	}
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", s.certFile, s.keyFile, err)
	}
	s.cert.Store(&cert)
	return nil
}

// checkValidity refuses a leaf certificate that now is outside of.
func checkValidity(leaf *x509.Certificate, now time.Time) error {
	switch {
	case leaf == nil:
		return errors.New("the certificate chain holds no certificate")
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate expired on %s (renew it, then send SIGHUP)", leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate is not valid before %s (check the clock or the renewal)", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// config is the server's TLS configuration: TLS 1.2 at least, the
// certificate in force at each handshake, HTTP/2 and HTTP/1.1.
func (s *servingCert) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
	}
}

// reloadLogged reloads s on SIGHUP and logs the outcome.
func (s *servingCert) reloadLogged(log *slog.Logger) {
	if err := s.reload(); err != nil {
		log.Error("TLS certificate reload failed; the previous certificate stays in use", "err", err)
		return
	}
	log.Info("TLS certificate reloaded", "cert", s.certFile, "key", s.keyFile)
}

// servingTLS is the certificate serve serves with, nil for plain HTTP,
// which it refuses on an address other hosts reach unless allowed (see
// checkPlaintext).
func (c config) servingTLS() (*servingCert, error) {
	if err := c.checkPlaintext(); err != nil {
		return nil, err
	}
	if c.TLSCert == "" {
		return nil, nil
	}
	return loadServingCert(c.TLSCert, c.TLSKey)
}

// checkTLS checks that --tls-cert and --tls-key come together.
func (c *config) checkTLS() []error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return []error{errors.New("--tls-cert and --tls-key: give both (the certificate chain and its private key, PEM) or neither")}
	}
	return nil
}

// checkPlaintext refuses to serve bearer tokens in plain HTTP on an address
// other hosts reach, unless the operator says TLS ends in front of tallyd
// (--allow-plaintext): a token sent in clear over a network is a token
// given to whoever reads it.
func (c config) checkPlaintext() error {
	if c.TLSCert != "" || c.AllowPlaintext || loopback(c.Listen) {
		return nil
	}
	return fmt.Errorf("%w: --listen %s is reachable from other hosts and tallyd would take bearer tokens over plain HTTP: "+
		"give --tls-cert and --tls-key, or --allow-plaintext when TLS ends at a proxy or load balancer in front of tallyd "+
		"(docs/operations.md, TLS)", errUsage, c.Listen)
}

// loopback reports whether the host of addr (host:port) is a loopback
// address or localhost; an empty host (all interfaces) is not.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
