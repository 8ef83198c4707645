package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	valuesBucket   = []byte("values")
	versionsBucket = []byte("versions")
)

// errNotFound is a missing key.
var errNotFound = errors.New("key not found")

// store is the plugin's embedded database: one bbolt file in the state
// directory. bbolt's transactions make every put atomic and durable.
type store struct {
	db *bolt.DB
}

func openStore(path string) (*store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	// The timeout turns a second plugin holding the file lock into an
	// error instead of a hang.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{valuesBucket, versionsBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare store %s: %w", path, err)
	}
	return &store{db: db}, nil
}

func (s *store) get(key string) (string, uint64, error) {
	var value string
	var version uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(valuesBucket).Get([]byte(key))
		if v == nil {
			return errNotFound
		}
		value = string(v)
		version = decodeVersion(tx.Bucket(versionsBucket).Get([]byte(key)))
		return nil
	})
	return value, version, err
}

func (s *store) put(key, value string) (uint64, error) {
	var version uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		versions := tx.Bucket(versionsBucket)
		version = decodeVersion(versions.Get([]byte(key))) + 1
		if err := tx.Bucket(valuesBucket).Put([]byte(key), []byte(value)); err != nil {
			return err
		}
		return versions.Put([]byte(key), encodeVersion(version))
	})
	return version, err
}

func (s *store) delete(key string) (bool, error) {
	var existed bool
	err := s.db.Update(func(tx *bolt.Tx) error {
		values := tx.Bucket(valuesBucket)
		existed = values.Get([]byte(key)) != nil
		if err := values.Delete([]byte(key)); err != nil {
			return err
		}
		return tx.Bucket(versionsBucket).Delete([]byte(key))
	})
	return existed, err
}

func (s *store) close() error { return s.db.Close() }

func encodeVersion(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func decodeVersion(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
