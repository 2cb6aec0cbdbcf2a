package sets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/tilepipe/tilepipe/artifacts"
)

// InputsFile is the name `tilepipe slurm` gives the input seeds its
// shards share, in the job directory.
const InputsFile = "inputs.json"

// FileRounds is the rounds an inputs file has seeds for: every round a
// replay can run (replay.MaxRounds, which a replay test holds equal).
const FileRounds = 1000

// maxInputsBytes bounds an inputs file: FileRounds seeds of 20 digits.
const maxInputsBytes = 64 << 10

// DrawFile draws the input seeds of every round a replay can run
// ([FileRounds]) and writes them to the new file path: the shards of one
// replay read them with --inputs ([ReadFile]), so that their visits draw
// the same inputs as one replay's would, and a merge has one inputs
// record. They are drawn after the prepared stage exists, as a replay's
// are.
func DrawFile(path string) error {
	s, err := Draw(FileRounds)
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

// ReadFile reads an inputs file ([DrawFile]) for a replay of rounds
// planned rounds: its seeds for those rounds, and the file's digest.
func ReadFile(path string, rounds int) (artifacts.InputSeeds, artifacts.Digest, error) {
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
