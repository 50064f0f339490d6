package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/tallyhq/tally/cmd/tallyd/server"
)

// Bounds of reading the credentials file, at start and on every SIGHUP.
const (
	// maxCredentialsBytes is the largest credentials file read: some
	// 20,000 entries, far more than any deployment holds.
	maxCredentialsBytes = 4 << 20
	// credentialsReadTimeout bounds reading the file: a hung network or
	// FUSE file system must not stop later reloads (a read past it is
	// abandoned and reported).
	credentialsReadTimeout = 5 * time.Second
)

// readCredentials reads and checks the credentials file at path: the file
// must hold at least one credential, and every problem is reported
// (joined), each naming the entry and the member. The read is bounded
// (readCredentialsFile): a FIFO, a device or a directory is refused
// without blocking, as is a file over maxCredentialsBytes, and a read that
// takes longer than credentialsReadTimeout fails.
func readCredentials(path string) ([]server.Credential, error) {
	data, err := readCredentialsFile(path)
	if err != nil {
		return nil, fmt.Errorf("read credentials file: %w", err)
	}
	creds, err := server.ParseCredentials(data)
	if err != nil {
		return nil, fmt.Errorf("credentials file %s:\n%w", path, err)
	}
	if len(creds) == 0 {
		return nil, fmt.Errorf("credentials file %s: no credential; nothing could call the API", path)
	}
	return creds, nil
}

// readCredentialsFile reads the regular file at path (a symbolic link to
// one is followed, as a Kubernetes secret volume mounts it), at most
// maxCredentialsBytes, within credentialsReadTimeout.
func readCredentialsFile(path string) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := readRegularFile(path, maxCredentialsBytes)
		done <- result{data, err}
	}()
	t := time.NewTimer(credentialsReadTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.data, r.err
	case <-t.C:
		return nil, fmt.Errorf("%s: not read within %s; is its file system answering?", path, credentialsReadTimeout)
	}
}

// readRegularFile reads the file at path when it is a regular file of at
// most max bytes. It opens the file non-blocking, so that opening a FIFO
// (which blocks until a writer opens it) returns at once, and then checks
// what it opened, so that a file swapped in between is judged as read.
func readRegularFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s); give the path of a JSON file", path, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, over the limit of %d bytes", path, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: over the limit of %d bytes", path, max)
	}
	return data, nil
}

// reloadCredentials implements the operations rule "SIGHUP reloads the file atomically": it
// reads path again and, when the whole file is valid, makes it auth's set
// in one step, logging the credentials added and removed. A file with any
// problem changes nothing: the old set stays, and every problem is logged,
// one line each. Either way the reload is logged and counted in
// tally_credentials_reloads_total{result}. It reports whether the new set
// is in use.
func reloadCredentials(path string, auth *server.Authenticator, m *server.Metrics, log *slog.Logger) bool {
	before := names(auth.Credentials())
	creds, err := readCredentials(path)
	if err == nil {
		err = auth.Replace(creds)
	}
	if err != nil {
		problems := leafErrors(err)
		for _, p := range problems {
			log.Error("credentials reload: problem", "file", path, "problem", p.Error())
		}
		log.Error("credentials reload failed; the previous credentials stay in use", "file", path, "problems", len(problems))
		m.CredentialsReloaded(false)
		return false
	}
	after := names(creds)
	var added, removed []string
	for _, n := range after {
		if _, found := slices.BinarySearch(before, n); !found {
			added = append(added, n)
		}
	}
	for _, n := range before {
		if _, found := slices.BinarySearch(after, n); !found {
			removed = append(removed, n)
		}
	}
	log.Info("credentials reloaded", "file", path, "credentials", len(creds), "added", added, "removed", removed)
	m.CredentialsReloaded(true)
	return true
}

// leafErrors flattens joined errors into the problems they hold.
func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	if w := errors.Unwrap(err); w != nil {
		if _, ok := w.(interface{ Unwrap() []error }); ok {
			return leafErrors(w)
		}
	}
	return []error{err}
}

func names(creds []server.Credential) []string {
	out := make([]string, len(creds))
	for i, c := range creds {
		out[i] = c.Name
	}
	slices.Sort(out)
	return out
}

// reloadOnSIGHUP reloads the credentials file and the TLS certificate (nil:
// none) on every SIGHUP until ctx ends. Without a credentials file (--dev)
// the credentials are not reloaded, which is logged.
func reloadOnSIGHUP(ctx context.Context, path string, auth *server.Authenticator, certs *servingCert, m *server.Metrics, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if certs != nil {
					certs.reloadLogged(log)
				}
				if path == "" {
					log.Warn("SIGHUP: no credentials file to reload (--dev)")
					continue
				}
				log.Info("SIGHUP: reloading the credentials file", "file", path)
				reloadCredentials(path, auth, m, log)
			}
		}
	}()
}
