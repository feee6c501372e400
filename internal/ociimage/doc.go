// Package ociimage builds container images from files without Docker and without a registry,
// on github.com/google/go-containerregistry: a Layer is a set of files, directories and
// symbolic links (from memory or from the host); an Image is layers plus an entrypoint, a user,
// environment and labels; WriteArchive writes it as one tar archive that `ctr images import`
// and `docker load` read (an OCI image layout in a tar).
//
// Builds are reproducible: every entry gets the same fixed modification time (Epoch unless the
// Image says otherwise), root or the given owner, no user or group names, and entries are
// written in sorted order with every parent directory present, so the same inputs give the
// same layer, config and manifest digests on any machine. The package knows nothing of
// Portico's binaries: e2e/tools/images says what goes into each image.
package ociimage
