package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/tallyhq/tally/cmd/tallyd/server"
)

// readCredentials reads and checks the credentials file at path: the file
// must hold at least one credential, and every problem is reported
// (joined), each naming the entry and the member.
func readCredentials(path string) ([]server.Credential, error) {
	data, err := os.ReadFile(path)
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

// reloadCredentials is issue 12's "SIGHUP reloads the file atomically": it
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

// reloadOnSIGHUP reloads the credentials file on every SIGHUP until ctx
// ends. Without a credentials file (--dev) a SIGHUP is logged and ignored.
func reloadOnSIGHUP(ctx context.Context, path string, auth *server.Authenticator, m *server.Metrics, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
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
