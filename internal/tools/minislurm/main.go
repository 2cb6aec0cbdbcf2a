// Command minislurm starts a real single-node Slurm for this machine
// (internal/slurmtest, as make test's TestSlurmArray does), prints the
// SLURM_CONF line to export, and keeps it running until it is interrupted
// (SIGINT or SIGTERM); then it cancels every job and stops the
// daemons. Evidence runs (docs/results) use it:
//
//	go run ./internal/tools/minislurm > /tmp/slurm.env &   # then: . /tmp/slurm.env
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tilepipe/tilepipe/internal/slurmtest"
)

func main() {
	c, err := slurmtest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, "minislurm:", err)
		os.Exit(1)
	}
	fmt.Printf("export SLURM_CONF=%s\n", c.Conf)
	fmt.Fprintf(os.Stderr, "minislurm: Slurm is up (%s); interrupt to stop it\n", c.Dir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Stop()
	fmt.Fprintln(os.Stderr, "minislurm: stopped")
}
