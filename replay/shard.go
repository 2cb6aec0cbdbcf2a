package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/sets"
)

// InputsFile is the name `tilepipe slurm` gives the input seeds its
// shards share, in the job directory.
const InputsFile = "inputs.json"

// maxInputsBytes bounds an inputs file: MaxRounds seeds of 20 digits.
const maxInputsBytes = 64 << 10

// DrawInputs draws the input seeds of every round a replay can run
// ([MaxRounds]) and writes them to the new file path: the shards of one
// replay read them with --inputs, so that their visits draw the same
// inputs as one replay's would, and a merge has one inputs record. They
// are drawn after the prepared stage exists, as a replay's are.
func DrawInputs(path string) error {
	s, err := sets.Draw(MaxRounds)
	if err != nil {
		return err
	}
	b, err := artifacts.MarshalJSON(artifacts.InputSeeds(s))
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("--inputs %s: exists; input seeds are drawn into a new file", path)
	}
	return artifacts.WriteFileAtomic(path, b)
}

// readInputs reads an inputs file (DrawInputs) for a replay of rounds
// planned rounds: its seeds for those rounds, and the file's digest.
func readInputs(path string, rounds int) (artifacts.InputSeeds, artifacts.Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return artifacts.InputSeeds{}, "", fmt.Errorf("--inputs: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInputsBytes+1))
	if err != nil {
		return artifacts.InputSeeds{}, "", fmt.Errorf("--inputs: %w", err)
	}
	if len(b) > maxInputsBytes {
		return artifacts.InputSeeds{}, "", fmt.Errorf("--inputs %s: more than %d bytes: not an inputs file", path, maxInputsBytes)
	}
	var s artifacts.InputSeeds
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return artifacts.InputSeeds{}, "", fmt.Errorf("--inputs %s: %v (want {\"replay\": seed, \"rounds\": [seed, ...]}, as tilepipe slurm writes it)", path, err)
	}
	if len(s.Rounds) < rounds {
		return artifacts.InputSeeds{}, "", fmt.Errorf("--inputs %s: rounds: seeds for %d rounds, the replay plans %d", path, len(s.Rounds), rounds)
	}
	s.Rounds = s.Rounds[:rounds]
	return s, digest.FromBytes(b), nil
}
