// Command kubectl-narad is the `kubectl narad` plugin: put it on PATH and run `kubectl narad`.
// It reads and patches NaradClusters, Topics and FanoutLinks through the Kubernetes API only.
//
//	go build -o bin/kubectl-narad ./operator/cmd/kubectl-narad
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"narad.dev/operator/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Run(ctx, plugin.Options{
		Streams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
	}, os.Args[1:])
	stop()
	os.Exit(code)
}
