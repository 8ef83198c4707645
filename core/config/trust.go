package config

import (
	"crypto/ed25519"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/core/packsign"
)

// TrustedKey is one trusted_key block: a key the operator trusts to sign
// packs, and the pack names it may sign.
type TrustedKey struct {
	// ID is the block's label, the keyId a signed pack.json names.
	ID string
	// PublicKey is the Ed25519 public key.
	PublicKey ed25519.PublicKey
	// Namespaces are the pack names the key may sign: names, or name
	// prefixes followed by ".*" (packsign.Key.Permits).
	Namespaces []string

	DefRange hcl.Range
}

// SigningKeys returns the trusted keys in the form packsign.Verify takes.
func (c *Config) SigningKeys() []packsign.Key {
	keys := make([]packsign.Key, 0, len(c.TrustedKeys))
	for _, k := range c.TrustedKeys {
		keys = append(keys, packsign.Key{ID: k.ID, Public: k.PublicKey, Namespaces: slices.Clone(k.Namespaces)})
	}
	return keys
}

type rawTrustedKey struct {
	ID         string         `hcl:"id,label"`
	PublicKey  *hcl.Attribute `hcl:"public_key"`
	Namespaces *hcl.Attribute `hcl:"namespaces"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

// trustedKey validates one trusted_key block. A key that does not decode
// is left out of the config (with its errors), so that it trusts nothing.
func (d *decoder) trustedKey(r *rawTrustedKey) *TrustedKey {
	k := &TrustedKey{ID: r.ID, DefRange: r.DefRange}
	ok := true
	if !packsign.ValidKeyID(r.ID) {
		d.errorf(r.DefRange, "Invalid trusted_key id",
			"A trusted_key's label is the keyId signed packs name: 1 to 128 letters, digits and ._~-; got %q.", r.ID)
		ok = false
	}
	nErrs := len(d.diags)
	if s, set := d.stringAttr(r.PublicKey); set {
		pub, err := packsign.ParsePublicKey(s)
		if err != nil {
			d.errorf(r.PublicKey.Expr.Range(), "Invalid public_key", "public_key: %s; `host keys generate` prints it.", err)
			ok = false
		}
		k.PublicKey = pub
	} else {
		ok = false
		if len(d.diags) == nErrs {
			d.errorf(r.DefRange, "Missing required argument",
				"The argument \"public_key\" is required in trusted_key %q: the key's Ed25519 public key, base64.", r.ID)
		}
	}
	nErrs = len(d.diags)
	if d.attr(r.Namespaces, &k.Namespaces) {
		rng := r.Namespaces.Expr.Range()
		if len(k.Namespaces) == 0 {
			d.errorf(rng, "Invalid namespaces", "namespaces must name at least one pack name or prefix such as \"vendor.acme.*\": a key that may sign nothing is of no use.")
			ok = false
		}
		for i, ns := range k.Namespaces {
			if msg := packsign.CheckNamespace(ns); msg != "" {
				d.errorf(rng, "Invalid namespaces", "Element %d of namespaces, %q, %s.", i, ns, msg)
				ok = false
			}
		}
	} else {
		ok = false
		if len(d.diags) == nErrs {
			d.errorf(r.DefRange, "Missing required argument",
				"The argument \"namespaces\" is required in trusted_key %q: the pack names the key may sign, such as [\"vendor.acme.*\"].", r.ID)
		}
	}
	if !ok {
		return nil
	}
	return k
}

func trustedKeyLabels(ks []*rawTrustedKey) []label {
	out := make([]label, 0, len(ks))
	for _, k := range ks {
		out = append(out, label{k.ID, k.DefRange})
	}
	return out
}
