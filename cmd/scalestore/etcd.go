package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/scalestore-go/scalestore/membership"
)

const etcdUsage = `Usage: scalestore etcd --data DIR

Runs a single-member etcd server in this process (the one tests and
'scalestore crashtest --cluster' use) and prints its client URL:

  etcd serving at http://127.0.0.1:PORT

Give that URL to every node (node --etcd URL): they then keep their
membership in it, and a node whose process dies is out of the view once its
lease expires. It serves until SIGINT or SIGTERM. One member is a single
point of failure: for a deployment, run an etcd cluster of three or five
members (docs/deploy.md).

Flags:
`

func runEtcd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, etcdUsage); fs.PrintDefaults() }
	dir := fs.String("data", "", "directory of the server's data (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "etcd: --data DIR is required, and there are no arguments")
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	e, err := membership.StartEmbedded(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "etcd: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "etcd serving at %s\n", strings.Join(e.Endpoints(), ","))
	<-sig
	if err := e.Close(); err != nil {
		fmt.Fprintf(stderr, "etcd: %v\n", err)
		return 1
	}
	return 0
}
