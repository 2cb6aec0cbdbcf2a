package main

import (
	"fmt"

	"github.com/tilepipe/tilepipe/artifacts/sign"
	"github.com/urfave/cli/v2"
)

func keyCommand() *cli.Command {
	return &cli.Command{
		Name:  "key",
		Usage: "signing keys for receipts (DSSE, ed25519)",
		Subcommands: []*cli.Command{{
			Name:  "generate",
			Usage: "write a new ed25519 key to NEW_FILE (0600) and its public half to NEW_FILE.pub",
			Flags: []cli.Flag{&cli.StringFlag{Name: "output", Usage: "NEW private key file"}},
			Action: func(c *cli.Context) error {
				if err := need(c, "output"); err != nil {
					return err
				}
				k, err := sign.Generate(c.String("output"))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "key %s (public: %s): id %s\n", c.String("output"), k.Public().Path, k.Public().ID)
				return nil
			},
		}},
	}
}

// signFlag is --sign of every command that writes a stage.
func signFlag() cli.Flag {
	return &cli.StringFlag{Name: "sign", Usage: "sign every receipt (and the audit) with this private key (tilepipe key generate); credentials never come from other flags"}
}

const keyMetadata = "signing key"

// loadSigningKey reads --sign's key before the command does any work, so
// a missing or malformed key is a usage error.
func loadSigningKey(c *cli.Context) error {
	path := c.String("sign")
	if path == "" {
		return nil
	}
	k, err := sign.Load(path)
	if err != nil {
		return fmt.Errorf("--sign: %w", err)
	}
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[keyMetadata] = k
	return nil
}

// signingKey is --sign's key, loaded; nil without --sign.
func signingKey(c *cli.Context) *sign.Key {
	k, _ := c.App.Metadata[keyMetadata].(*sign.Key)
	return k
}

// trustedKeys reads audit's --trust public keys.
func trustedKeys(c *cli.Context) ([]sign.Public, error) {
	var out []sign.Public
	for _, p := range c.StringSlice("trust") {
		k, err := sign.LoadPublic(p)
		if err != nil {
			return nil, usageError{fmt.Errorf("audit: --trust: %w", err)}
		}
		out = append(out, k)
	}
	return out, nil
}
