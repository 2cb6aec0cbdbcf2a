// Package sign signs stage receipts and audit statements as DSSE envelopes
// (the in-toto envelope format, github.com/secure-systems-lab/go-securesystemslib/dsse)
// with ed25519 keys, and verifies them against the keys a reviewer
// trusts.
//
// # Keys
//
// A [Key] is an ed25519 private key in a PEM file ("PRIVATE KEY", PKCS #8,
// mode 0600); its [Public] half is the file beside it with ".pub" added
// ("PUBLIC KEY", PKIX). A key's ID is the hex sha256 of the public key's
// PKIX DER bytes: the keyid of every signature it makes.
//
// # Envelopes
//
// [Key.Seal] wraps a payload (a receipt: an in-toto Statement) in an
// envelope signed over DSSE's pre-authentication encoding of payload type
// and payload; [Parse] reads one back without trusting it, and [Verify]
// says which trusted key signed it, or why none did.
package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// MediaEnvelope is the media type of a DSSE envelope.
const MediaEnvelope = "application/vnd.dsse.envelope.v1+json"

// Key is a private signing key.
type Key struct {
	priv ed25519.PrivateKey
	pub  Public
}

// Public is a public key a reviewer trusts; Path is the file it came from.
type Public struct {
	Key  ed25519.PublicKey
	ID   string
	Path string
}

func publicOf(k ed25519.PublicKey, path string) (Public, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return Public{}, err
	}
	sum := sha256.Sum256(der)
	return Public{Key: k, ID: hex.EncodeToString(sum[:]), Path: path}, nil
}

// Generate makes a new key and writes it to path (mode 0600) and its
// public half to path+".pub" (0644); neither may exist.
func Generate(path string) (*Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	p, err := publicOf(pub, path+".pub")
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	pkix, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	for _, f := range []string{path, p.Path} {
		if _, err := os.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("key %s already exists; choose a new path", f)
		}
	}
	if err := writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(p.Path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix}), 0o644); err != nil {
		os.Remove(path)
		return nil, err
	}
	return &Key{priv: priv, pub: p}, nil
}

// writeNew writes a file that must not exist, and syncs it.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// pemBlock reads the one PEM block of type typ in the file at path.
func pemBlock(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, rest := pem.Decode(b)
	switch {
	case blk == nil:
		return nil, fmt.Errorf("key %s: no PEM block: want a %q block (tilepipe key generate writes one)", path, typ)
	case blk.Type != typ:
		return nil, fmt.Errorf("key %s: PEM block %q, want %q", path, blk.Type, typ)
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, fmt.Errorf("key %s: data after the %q block", path, typ)
	}
	return blk.Bytes, nil
}

// Load reads a private key that Generate wrote.
func Load(path string) (*Key, error) {
	der, err := pemBlock(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key %s: a %T key, want ed25519", path, k)
	}
	p, err := publicOf(priv.Public().(ed25519.PublicKey), path+".pub")
	if err != nil {
		return nil, err
	}
	return &Key{priv: priv, pub: p}, nil
}

// LoadPublic reads a public key that Generate wrote.
func LoadPublic(path string) (Public, error) {
	der, err := pemBlock(path, "PUBLIC KEY")
	if err != nil {
		return Public{}, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return Public{}, fmt.Errorf("key %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return Public{}, fmt.Errorf("key %s: a %T key, want ed25519", path, k)
	}
	return publicOf(pub, path)
}

// Public is k's public half.
func (k *Key) Public() Public { return k.pub }

// signer is a Key as DSSE's Signer; verifier a Public as its Verifier.
type signer struct{ k *Key }
type verifier struct{ p Public }

func (s signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.k.priv, data), nil
}
func (s signer) KeyID() (string, error) { return s.k.pub.ID, nil }

func (v verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.p.Key, data, sig) {
		return errors.New("ed25519: signature does not verify")
	}
	return nil
}
func (v verifier) KeyID() (string, error)   { return v.p.ID, nil }
func (v verifier) Public() crypto.PublicKey { return v.p.Key }

// Seal signs payload (of payloadType) with k and returns the envelope's
// JSON.
func (k *Key) Seal(payloadType string, payload []byte) ([]byte, error) {
	es, err := dsse.NewEnvelopeSigner(signer{k})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(context.Background(), payloadType, payload)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(env, "", "  ")
	return append(b, '\n'), err
}

// Parse reads an envelope (unknown fields refused) whose payload type is
// payloadType and returns it with its decoded payload. Nothing is
// verified.
func Parse(b []byte, payloadType string) (*dsse.Envelope, []byte, error) {
	var env dsse.Envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, nil, fmt.Errorf("envelope: %w", err)
	}
	if dec.More() {
		return nil, nil, errors.New("envelope: data after the JSON value")
	}
	if env.PayloadType != payloadType {
		return nil, nil, fmt.Errorf("envelope payloadType %q, want %q", env.PayloadType, payloadType)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return nil, nil, fmt.Errorf("envelope payload: %w", err)
	}
	return &env, payload, nil
}

// KeyIDs lists the keyids an envelope's signatures name.
func KeyIDs(env *dsse.Envelope) []string {
	var ids []string
	for _, s := range env.Signatures {
		ids = append(ids, s.KeyID)
	}
	return ids
}

// Verify returns the trusted key whose signature on env verifies. The
// error says why none does: no signature, signatures only by keys not
// trusted, or a trusted key's signature that does not verify (the payload
// was changed after it was signed).
func Verify(env *dsse.Envelope, trusted []Public) (Public, error) {
	if len(env.Signatures) == 0 {
		return Public{}, errors.New("no signature")
	}
	byID := map[string]Public{}
	var ids []string
	for _, p := range trusted {
		byID[p.ID] = p
		ids = append(ids, Short(p.ID))
	}
	for _, s := range env.Signatures {
		p, ok := byID[s.KeyID]
		if !ok {
			continue
		}
		ev, err := dsse.NewEnvelopeVerifier(verifier{p})
		if err != nil {
			return Public{}, err
		}
		if _, err := ev.Verify(context.Background(), env); err != nil {
			return Public{}, fmt.Errorf("the signature of trusted key %s (%s) does not verify: changed after it was signed", Short(p.ID), p.Path)
		}
		return p, nil
	}
	var named []string
	for _, id := range KeyIDs(env) {
		named = append(named, Short(id))
	}
	return Public{}, fmt.Errorf("signed by key %s, which no --trust key is (trusted: %s)", strings.Join(named, ", "), strings.Join(ids, ", "))
}

// Short is the first 16 hex digits of a key ID, for messages.
func Short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}
