package publish

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/ociimage"
)

// SBOMMediaType is the SBOM artifact's type (its config's media type, which the referrers API
// reports as the artifactType) and its one layer's.
const SBOMMediaType types.MediaType = "application/spdx+json"

// The SPDX 2.3 JSON document, as much of it as Portico fills in.
type (
	SPDXDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      SPDXCreationInfo   `json:"creationInfo"`
		Packages          []SPDXPackage      `json:"packages"`
		Relationships     []SPDXRelationship `json:"relationships"`
	}
	SPDXCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	SPDXPackage struct {
		SPDXID                string            `json:"SPDXID"`
		Name                  string            `json:"name"`
		VersionInfo           string            `json:"versionInfo,omitempty"`
		DownloadLocation      string            `json:"downloadLocation"`
		FilesAnalyzed         bool              `json:"filesAnalyzed"`
		PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
		ExternalRefs          []SPDXExternalRef `json:"externalRefs,omitempty"`
	}
	SPDXExternalRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	SPDXRelationship struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
)

// SBOM returns the SPDX document of the platform image b (digest d): the image, the Go modules
// its binaries are built from (their build information; the main module at version), and the
// Debian packages its files come from, each with a package URL.
func SBOM(b images.Built, version string, d v1.Hash) (*SPDXDocument, error) {
	doc := &SPDXDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("%s %s linux/%s", b.Name, version, b.Arch),
		DocumentNamespace: fmt.Sprintf("https://github.com/portico-lb/portico/spdx/%s/%s", b.Name, d),
		// The build's time is Epoch (ociimage.Epoch), as the images', so that the same source
		// gives the same SBOM digest.
		CreationInfo: SPDXCreationInfo{Created: ociimage.Epoch.Format("2006-01-02T15:04:05Z"), Creators: []string{"Tool: portico-publish"}},
	}
	image := SPDXPackage{SPDXID: "SPDXRef-Image", Name: b.Name, VersionInfo: version, DownloadLocation: "NOASSERTION",
		PrimaryPackagePurpose: "CONTAINER",
		ExternalRefs: []SPDXExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: fmt.Sprintf("pkg:oci/%s@%s?arch=%s", b.Name, url.QueryEscape(d.String()), b.Arch)}}}
	doc.Packages = append(doc.Packages, image)
	doc.Relationships = append(doc.Relationships, SPDXRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", image.SPDXID})
	modules := map[string]string{}
	for _, bin := range b.Binaries {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("reading the build information of %s: %w", bin, err)
		}
		modules[info.Main.Path] = version
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			modules[m.Path] = m.Version
		}
	}
	add := func(kind, name, version, purl string) {
		id := fmt.Sprintf("SPDXRef-%s-%d", kind, len(doc.Packages))
		doc.Packages = append(doc.Packages, SPDXPackage{SPDXID: id, Name: name, VersionInfo: version, DownloadLocation: "NOASSERTION",
			PrimaryPackagePurpose: "LIBRARY",
			ExternalRefs:          []SPDXExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl}}})
		doc.Relationships = append(doc.Relationships, SPDXRelationship{image.SPDXID, "CONTAINS", id})
	}
	for _, m := range slices.Sorted(maps.Keys(modules)) {
		add("GoModule", m, modules[m], "pkg:golang/"+m+"@"+url.PathEscape(modules[m]))
	}
	for _, p := range slices.Sorted(maps.Keys(b.Packages)) {
		add("DebianPackage", p, b.Packages[p], fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", p, url.PathEscape(b.Packages[p]), images.DebianArch(b.Arch)))
	}
	return doc, nil
}

// sbomArtifact returns the OCI artifact carrying doc that refers to the image described by
// subject.
func sbomArtifact(doc *SPDXDocument, subject v1.Descriptor) (v1.Image, error) {
	data, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), SBOMMediaType),
		static.NewLayer(data, SBOMMediaType))
	if err != nil {
		return nil, err
	}
	img = mutate.Annotations(img, map[string]string{"org.opencontainers.image.created": doc.CreationInfo.Created}).(v1.Image)
	return mutate.Subject(img, subject).(v1.Image), nil
}

// ModuleNames returns the Go modules an SBOM lists (name@version), for checks.
func (d *SPDXDocument) ModuleNames() []string {
	var out []string
	for _, p := range d.Packages {
		for _, r := range p.ExternalRefs {
			if strings.HasPrefix(r.ReferenceLocator, "pkg:golang/") {
				out = append(out, p.Name+"@"+p.VersionInfo)
			}
		}
	}
	return out
}
