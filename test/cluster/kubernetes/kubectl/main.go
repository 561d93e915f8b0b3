// Command kubectl is the upstream Kubernetes command-line client, built from
// the same published modules as the test API server, for test scripts and
// the README's local run.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand())
}
