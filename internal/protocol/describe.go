// Package protocol holds the route protocol's messages (docs/protocol.md)
// that more than one stage reads: capture asks a route to describe
// itself, and the audit reads the stored answer again.
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

// Description is a route's describe answer (docs/protocol.md).
type Description struct {
	Protocol  int      `json:"protocol"`
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	Version   string   `json:"version"`
	Available bool     `json:"available"`
	Reason    string   `json:"reason"`
	Ops       []string `json:"ops"`
	// Validates: the route runs its own build once and returns the outputs
	// it computed from the inputs capture hands it.
	Validates bool `json:"validates"`
	// AcceptsIR: the route builds from external IR (--ir, --abi).
	AcceptsIR bool `json:"accepts_ir"`
	// Devices the route builds for (absent: the CPU alone); capture never
	// asks it to build a case for another device.
	Devices []string `json:"devices,omitempty"`
	// BuildCache: the route's builds take --cache DIR, a directory that
	// every build of the route in one capture shares (what one build
	// learned of the machine, another need not learn again).
	BuildCache bool `json:"build_cache"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidName reports whether s may name a route or a case: it names files.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// ParseDescription decodes a describe answer strictly (one JSON object,
// no unknown field) and checks it.
func ParseDescription(b []byte) (Description, error) {
	var d Description
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("stdout: want one JSON object (docs/protocol.md): %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return d, errors.New("stdout: want one JSON object (docs/protocol.md), found more after it")
	}
	switch {
	case d.Protocol != 1:
		return d, fmt.Errorf("protocol: want 1, got %d", d.Protocol)
	case !ValidName(d.Name):
		return d, fmt.Errorf("name %q: want letters, digits, '.', '_' or '-'", d.Name)
	case d.Kind != artifacts.KindObject && d.Kind != artifacts.KindProcess && d.Kind != artifacts.KindCubin:
		return d, fmt.Errorf("kind %q: want object, process or cubin", d.Kind)
	case d.Kind == artifacts.KindCubin && !slices.Equal(d.Devices, []string{oracle.DeviceCUDA}):
		return d, fmt.Errorf("kind cubin: devices %v, want [cuda] (a cubin runs on the GPU alone)", d.Devices)
	case !d.Available && d.Reason == "":
		return d, errors.New("an unavailable route must give a reason")
	}
	for _, dev := range d.Devices {
		if dev != oracle.DeviceCPU && dev != oracle.DeviceCUDA {
			return d, fmt.Errorf("devices: %q: want %s or %s", dev, oracle.DeviceCPU, oracle.DeviceCUDA)
		}
	}
	return d, nil
}
