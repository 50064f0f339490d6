package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/pflag"
)

const healthcheckUsage = `Usage: tallyd healthcheck [--url URL] [--timeout D]

Sends GET /healthz to a running tallyd and exits 0 when it answers 200, 1
otherwise: a container HEALTHCHECK for images without a shell or curl
(the Dockerfile's). The default URL is built from TALLY_LISTEN (all
interfaces become loopback) and is https when TALLY_TLS_CERT is set; on a
loopback host the certificate is not verified (it names the public host),
since only liveness is checked.

Flags:
`

// healthcheckCmd runs `tallyd healthcheck`.
func healthcheckCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("tallyd healthcheck", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	target := fs.String("url", "", "the URL to GET; empty: /healthz at TALLY_LISTEN, else 127.0.0.1:8080")
	timeout := fs.Duration("timeout", 3*time.Second, "how long the answer may take")
	help := fs.BoolP("help", "h", false, "print this help")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w (see tallyd healthcheck --help)", errUsage, err)
	}
	if *help {
		fmt.Fprint(stdout, healthcheckUsage+fs.FlagUsages())
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *target == "" {
		*target = healthzURL(getenv("TALLY_LISTEN"), getenv("TALLY_TLS_CERT") != "")
	}
	u, err := url.Parse(*target)
	if err != nil {
		// The text may hold a password: it is not repeated.
		return fmt.Errorf("%w: --url: not a URL: must be an http or https URL", errUsage)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --url %q: must be an http or https URL", errUsage, u.Redacted())
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Only this host's liveness is checked: a loopback address is not
	// the name the certificate carries.
	transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: loopback(net.JoinHostPort(u.Hostname(), "0"))}
	client := &http.Client{Transport: transport, Timeout: *timeout}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s, want 200", u.Redacted(), resp.Status)
	}
	return nil
}

// healthzURL is /healthz of the address tallyd listens on (listen, the
// --listen value; empty: the default), reached from this host.
func healthzURL(listen string, tlsOn bool) string {
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = "127.0.0.1", "8080"
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http"
	if tlsOn {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/healthz"
}
