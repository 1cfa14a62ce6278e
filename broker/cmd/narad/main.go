// Command narad is the Narad broker and its CLI in one binary: `narad serve` runs a node,
// every other subcommand is a client of the /v1 API.
package main

import (
	"os"

	"narad.dev/broker/internal/cli"
	"narad.dev/broker/internal/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	root := cli.NewRoot(cli.RootOptions{Version: version, Serve: server.NewServeCommand})
	os.Exit(cli.Main(root))
}
