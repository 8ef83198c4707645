package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/packsign"
	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/internal/rooted"
	"github.com/wophost/wophost/sdk/wop"
)

func keysCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage the Ed25519 keys packs are signed with",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(keysGenerateCommand(g), keysSignCommand(g), keysVerifyFileCommand(g))
	return cmd
}

// maxSignedFileSize bounds a file `host keys sign` signs: Ed25519 reads
// the whole message twice, so the file is held in memory. A release signs
// its checksum list, not its archives.
const maxSignedFileSize = 16 << 20

func keysSignCommand(g *globals) *cobra.Command {
	var keyPath string
	cmd := &cobra.Command{
		Use:   "sign --key KEYFILE FILE...",
		Short: "Sign files: write a detached signature FILE.sig beside each",
		Long: "Sign each FILE with the private key file KEYFILE (from `host keys generate`) and write the\n" +
			"detached signature to FILE" + packsign.FileSignatureSuffix + ", replacing one there. The scheme is " + packsign.FileScheme + ":\n" +
			"Ed25519ctx over the file's bytes, with a context of its own, so that a file signature is never\n" +
			"taken for a pack signature by the same key, nor the other way round. A file is at most 16 MiB:\n" +
			"sign a list of checksums (SHA256SUMS) rather than large files. `host keys verify-file` checks it.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyPath == "" {
				return errors.New("sign needs --key KEYFILE, a private key file from `host keys generate`")
			}
			id, key, err := readPrivateKey(keyPath)
			if err != nil {
				return &failure{err}
			}
			pub := packsign.EncodePublicKey(key.Public().(ed25519.PublicKey))
			for _, path := range args {
				data, err := readSignedFile(path)
				if err != nil {
					return &failure{err}
				}
				sig, err := packsign.SignFile(key, id, data)
				if err != nil {
					return &failure{fmt.Errorf("%s: %w", path, err)}
				}
				sigPath := path + packsign.FileSignatureSuffix
				if err := atomicfile.Write(sigPath, sig.Marshal(), 0o644); err != nil {
					return &failure{err}
				}
				fmt.Fprintf(g.stdout, "signed %s with key %s (public key %s): wrote %s\n", path, id, pub, sigPath)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "private key file (KEYID.key.json)")
	return cmd
}

// readSignedFile reads a file to sign or verify, of at most
// maxSignedFileSize bytes.
func readSignedFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSignedFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxSignedFileSize {
		return nil, fmt.Errorf("%s is larger than %d MiB: sign a list of its checksums instead", path, maxSignedFileSize>>20)
	}
	return data, nil
}

func keysVerifyFileCommand(g *globals) *cobra.Command {
	var keyPath, publicKey, sigPath string
	cmd := &cobra.Command{
		Use:   "verify-file (--key PUBFILE | --public-key KEY) FILE",
		Short: "Check a file's detached signature (FILE.sig) against a public key",
		Long: "Verify the detached signature of FILE, written by `host keys sign`, against the public key\n" +
			"file PUBFILE (KEYID.pub.json), whose key id the signature must name, or against the public\n" +
			"key itself in base64 (--public-key). The signature is read from FILE" + packsign.FileSignatureSuffix + " unless\n" +
			"--signature names it. The exit status is 1 when the signature does not verify.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (keyPath == "") == (publicKey == "") {
				return errors.New("verify-file needs exactly one of --key PUBFILE (a public key file) and --public-key KEY (base64)")
			}
			var keyID string
			var pub ed25519.PublicKey
			if keyPath != "" {
				data, err := os.ReadFile(keyPath)
				if err != nil {
					return &failure{err}
				}
				if keyID, pub, err = packsign.ParsePublicKeyFile(data); err != nil {
					return &failure{fmt.Errorf("%s %w", keyPath, err)}
				}
			} else {
				var err error
				if pub, err = packsign.ParsePublicKey(publicKey); err != nil {
					return fmt.Errorf("--public-key: %w", err)
				}
			}
			path := args[0]
			if sigPath == "" {
				sigPath = path + packsign.FileSignatureSuffix
			}
			data, err := readSignedFile(path)
			if err != nil {
				return &failure{err}
			}
			sigData, err := os.ReadFile(sigPath)
			if err != nil {
				return &failure{err}
			}
			sig, err := packsign.ParseFileSignature(sigData)
			if err != nil {
				return &failure{fmt.Errorf("%s %w", sigPath, err)}
			}
			if err := packsign.VerifyFile(pub, keyID, data, sig); err != nil {
				fmt.Fprintf(g.stdout, "%s: not verified: %v\n", path, err)
				return &exitError{code: 1}
			}
			fmt.Fprintf(g.stdout, "%s: verified: signed by key %s\n", path, sig.KeyID)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "public key file (KEYID.pub.json)")
	cmd.Flags().StringVar(&publicKey, "public-key", "", "the Ed25519 public key, base64, as `host keys generate` prints it")
	cmd.Flags().StringVar(&sigPath, "signature", "", "the signature file (default FILE"+packsign.FileSignatureSuffix+")")
	return cmd
}

func keysGenerateCommand(g *globals) *cobra.Command {
	var dir string
	var namespaces []string
	cmd := &cobra.Command{
		Use:   "generate KEYID",
		Short: "Write a new signing key pair: KEYID.key.json (private, mode 0600) and KEYID.pub.json",
		Long: "Generate an Ed25519 key pair for signing packs (`host packs sign`). The private key file,\n" +
			"KEYID.key.json, is written with mode 0600: keep it on the machine that signs, never in a pack.\n" +
			"The public key file, KEYID.pub.json, is for the operators who run your packs; the command\n" +
			"also prints the trusted_key block they add to host.hcl. Existing files are never overwritten.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if !packsign.ValidKeyID(id) {
				return fmt.Errorf("key id %q: a key id is 1 to 128 letters, digits and ._~-", id)
			}
			for _, ns := range namespaces {
				if msg := packsign.CheckNamespace(ns); msg != "" {
					return fmt.Errorf("--namespace %q %s", ns, msg)
				}
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return &failure{fmt.Errorf("generate a key: %w", err)}
			}
			// The directory holds a private key: a new one, and any
			// parents made for it, are for its owner alone.
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return &failure{fmt.Errorf("--dir %s: %w", dir, err)}
			}
			privPath := filepath.Join(dir, id+".key.json")
			pubPath := filepath.Join(dir, id+".pub.json")
			if err := writeNew(privPath, packsign.MarshalPrivateKey(id, priv), 0o600); err != nil {
				return &failure{err}
			}
			if err := writeNew(pubPath, packsign.MarshalPublicKey(id, pub), 0o644); err != nil {
				os.Remove(privPath)
				return &failure{err}
			}
			fmt.Fprintf(g.stdout, "wrote %s: the private key (mode 0600); keep it where you sign, never in a pack\n", privPath)
			fmt.Fprintf(g.stdout, "wrote %s: the public key, for the operators who run your packs\n", pubPath)
			fmt.Fprintln(g.stdout, "an operator trusts it with this block in host.hcl:")
			fmt.Fprintf(g.stdout, "trusted_key %q {\n", id)
			fmt.Fprintf(g.stdout, "  public_key = %q\n", packsign.EncodePublicKey(pub))
			if len(namespaces) == 0 {
				fmt.Fprintln(g.stdout, `  namespaces = ["vendor.example.*"] # the pack names it may sign`)
			} else {
				q := make([]string, len(namespaces))
				for i, ns := range namespaces {
					q[i] = fmt.Sprintf("%q", ns)
				}
				fmt.Fprintf(g.stdout, "  namespaces = [%s]\n", strings.Join(q, ", "))
			}
			fmt.Fprintln(g.stdout, "}")
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to write the key files to; made (mode 0700, with its parents) when missing")
	cmd.Flags().StringSliceVar(&namespaces, "namespace", nil, "a pack name or prefix (\"vendor.acme.*\") the key is for, shown in the printed trusted_key block; repeated or comma-separated")
	return cmd
}

// writeNew writes a file that must not exist yet, with mode perm.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists already; a key file is never overwritten", path)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func packsSignCommand(g *globals) *cobra.Command {
	var keyPath string
	cmd := &cobra.Command{
		Use:   "sign --key KEYFILE PACKDIR",
		Short: "Sign a pack: write its files' sha256 and signing block into pack.json, and pack.sig.json",
		Long: "Sign the pack in PACKDIR with the private key file KEYFILE (from `host keys generate`),\n" +
			"by OpenWOP's ed25519-canonical-json scheme. pack.json gets the entry binary's sha256\n" +
			"(" + packmanifest.EntrySHA256Key + "), the sha256 of every other file under PACKDIR but the\n" +
			"signature file (" + packmanifest.FilesKey + ") and the signing block {keyId, scheme}, every\n" +
			"other byte kept; then the Ed25519 signature over its canonical JSON (RFC 8785) is written to\n" +
			packsign.FileName + " next to it. Sign after the last change to pack.json and the binary\n" +
			"(`host prompts lock` included) and to the pack's files: any later change, and any file\n" +
			"added, makes the signature fail. A symbolic link in the pack is refused.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyPath == "" {
				return errors.New("sign needs --key KEYFILE, a private key file from `host keys generate`")
			}
			return signPack(g, keyPath, args[0])
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "private key file (KEYID.key.json)")
	return cmd
}

func signPack(g *globals, keyPath, dir string) error {
	id, key, err := readPrivateKey(keyPath)
	if err != nil {
		return &failure{err}
	}
	m, raw, err := packmanifest.Load(dir)
	if err != nil {
		return &failure{err}
	}
	sum, err := entrySHA256(dir, m.Runtime.Entry)
	if err != nil {
		return &failure{err}
	}
	files, err := packsign.Digests(dir)
	if err != nil {
		return &failure{fmt.Errorf("digest the pack's files: %w", err)}
	}
	out, err := spliceJSONKey(raw, packmanifest.EntrySHA256Key, sum)
	if err == nil {
		out, err = spliceJSONKey(out, packmanifest.FilesKey, files)
	}
	if err == nil {
		out, err = spliceJSONKey(out, "signing", struct {
			KeyID  string `json:"keyId"`
			Scheme string `json:"scheme"`
		}{id, packsign.Scheme})
	}
	if err != nil {
		return &failure{fmt.Errorf("%s: %w", filepath.Join(dir, packmanifest.FileName), err)}
	}
	// What is signed must still be a pack this host loads.
	if _, err := packmanifest.Parse(out); err != nil {
		return &failure{err}
	}
	sig, err := packsign.Sign(key, id, out)
	if err != nil {
		return &failure{err}
	}
	manifestPath := filepath.Join(dir, packmanifest.FileName)
	if err := replaceFile(manifestPath, out); err != nil {
		return &failure{err}
	}
	sigPath := filepath.Join(dir, packsign.FileName)
	if err := atomicfile.Write(sigPath, sig.Marshal(), 0o644); err != nil {
		return &failure{err}
	}
	fmt.Fprintf(g.stdout, "signed %s %s with key %s\n", m.Name, m.Version, id)
	fmt.Fprintf(g.stdout, "%s: signing {keyId %q, scheme %q}, %s of %s:\n  %s\n", manifestPath, id, packsign.Scheme, packmanifest.EntrySHA256Key, m.Runtime.Entry, sum)
	fmt.Fprintf(g.stdout, "%s: %s of the pack's %d files (every file but %s and %s)\n", manifestPath, packmanifest.FilesKey, len(files), packmanifest.FileName, packsign.FileName)
	fmt.Fprintf(g.stdout, "wrote %s\n", sigPath)
	return nil
}

// readPrivateKey reads a private key file, refusing one that users other
// than its owner may read: a signing key others can copy signs for them.
func readPrivateKey(path string) (string, ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", nil, fmt.Errorf("the private key file %s may be read or written by others (mode %s): chmod 600 it, and make a new key if others may have copied it", path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, packsign.MaxFileSize+1))
	if err != nil {
		return "", nil, err
	}
	id, key, err := packsign.ParsePrivateKey(data)
	if err != nil {
		return "", nil, fmt.Errorf("%s %w", path, err)
	}
	return id, key, nil
}

// entrySHA256 is the hex sha256 of the pack's entry binary, opened inside
// the pack directory as the host opens it.
func entrySHA256(dir, entry string) (string, error) {
	f, err := rooted.OpenFile(dir, entry, os.O_RDONLY)
	if err != nil {
		return "", fmt.Errorf("runtime.entry %s: %w", entry, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash runtime.entry %s: %w", entry, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// verifyResult is what `host packs verify --json` prints of one pack.
type verifyResult struct {
	Dir         string `json:"dir"`
	Pack        string `json:"pack,omitempty"`
	Version     string `json:"version,omitempty"`
	Verified    bool   `json:"verified"`
	KeyID       string `json:"keyId,omitempty"`
	EntrySHA256 string `json:"entrySha256,omitempty"`
	// Files counts the files whose signed digests were checked: every
	// file of the pack but pack.json and the signature file, the entry
	// binary included.
	Files int `json:"files,omitempty"`
	// Error is the refusal's ctx-level envelope.
	Error any `json:"error,omitempty"`
}

func packsVerifyCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify PACKDIR...",
		Short: "Check that each pack is signed by a key the config trusts for its name, its binary included",
		Long: "Verify the signature of each pack directory against the config's trusted_key blocks, as the\n" +
			"host does when it loads the pack: the signature over pack.json's canonical JSON, the key's\n" +
			"permitted namespaces, the sha256 of every file of the pack and of the entry binary. An unsigned pack fails here whatever\n" +
			"require_signature says. The exit status is 1 when any pack fails.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			keys := cfg.SigningKeys()
			failed := false
			var results []verifyResult
			for _, dir := range args {
				r := verifyPack(dir, keys)
				results = append(results, r)
				if !r.Verified {
					failed = true
				}
				if g.json {
					continue
				}
				if r.Verified {
					fmt.Fprintf(g.stdout, "%s: %s %s verified: signed by %s, runtime.entry and the %d other files match their signed sha256\n", dir, r.Pack, r.Version, r.KeyID, r.Files-1)
					continue
				}
				fmt.Fprintf(g.stdout, "%s: not verified\n", dir)
				if err := writeJSON(g.stdout, r.Error, true); err != nil {
					return err
				}
			}
			if g.json {
				if err := g.encode(results); err != nil {
					return err
				}
			}
			if failed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

// verifyPack verifies the pack in dir against keys, requiring a
// signature, and checks the signed digest on the entry binary.
func verifyPack(dir string, keys []packsign.Key) verifyResult {
	r := verifyResult{Dir: dir}
	fail := func(err error) verifyResult {
		r.Error = wop.AsError(err)
		return r
	}
	// As at a load, the signature is checked before anything else of the
	// pack is read: a schema changed since signing is reported as that.
	m, raw, err := packmanifest.Read(dir)
	if err != nil {
		return fail(err)
	}
	r.Pack, r.Version = m.Name, m.Version
	v, err := packsign.Verify(dir, raw, m, keys, true)
	if err != nil {
		return fail(err)
	}
	if err := m.LoadSchemas(dir); err != nil {
		return fail(err)
	}
	exe, err := loader.OpenPackEntry(dir, m.Runtime.Entry, loader.Checks{SHA256: v.EntrySHA256, AllowWritable: true})
	if err != nil {
		var ce *loader.ChecksumError
		if errors.As(err, &ce) {
			return fail(packsign.DigestMismatch(m.Name, v.KeyID, ce.Path, ce.Expected, ce.Actual))
		}
		return fail(err)
	}
	exe.Close()
	r.Verified, r.KeyID, r.EntrySHA256, r.Files = true, v.KeyID, v.EntrySHA256, len(m.Files)
	return r
}
