package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// imageCommand packs one static binary into an image FROM scratch, written as
// a docker-archive (what `ctr images import` and `podman load` read): the
// binary is /NAME and the entrypoint, followed by the given arguments. The
// archive is reproducible: the same binary gives the same image ID.
//
//	testcluster image --name localhost/pause:test --out pause.tar ./pause
func imageCommand(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	name := fs.String("name", "", "the image reference, e.g. localhost/pause:test")
	out := fs.String("out", "", "the archive to write")
	_ = fs.Parse(args)
	if *name == "" || *out == "" || fs.NArg() < 1 {
		usage()
	}
	binary, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	archive, err := imageArchive(*name, filepath.Base(fs.Arg(0)), binary, fs.Args()[1:])
	if err != nil {
		return err
	}
	return os.WriteFile(*out, archive, 0o644)
}

// epoch is the time stamp of every file in an image, for reproducibility.
var epoch = time.Unix(0, 0).UTC()

func imageArchive(ref, file string, binary []byte, args []string) ([]byte, error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	for _, d := range []string{"tmp/"} {
		if err := lw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := lw.WriteHeader(&tar.Header{Name: file, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(binary)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := lw.Write(binary); err != nil {
		return nil, err
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	layerID := hex.EncodeToString(layerSum[:])
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": []string{"/" + file},
			"Cmd":        args,
			"Env":        []string{"PATH=/"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerID}},
		"history": []map[string]any{{
			"created": epoch.Format(time.RFC3339), "created_by": "testcluster image " + file,
		}},
	})
	if err != nil {
		return nil, err
	}
	configSum := sha256.Sum256(config)
	configID := hex.EncodeToString(configSum[:])
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configID + ".json",
		"RepoTags": []string{ref},
		"Layers":   []string{layerID + "/layer.tar"},
	}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	entries := []struct {
		name string
		data []byte
	}{
		{layerID + "/layer.tar", layer.Bytes()},
		{configID + ".json", config},
		{"manifest.json", manifest},
	}
	if err := w.WriteHeader(&tar.Header{Name: layerID + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := w.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := w.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return out.Bytes(), nil
}
