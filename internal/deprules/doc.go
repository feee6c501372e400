// Package deprules holds the dependency rules of the house (STYLE.md rule 15: each binary links
// only what it runs) and checks them against `go list -deps`: portico-agent links no AWS SDK,
// no provider implementation and no controller-runtime client; portico-controller and
// portico-ccm link no memberlist, GoBGP or netlink; config and the ground floor (servicerules,
// addresspool) import no Portico package but each other, annotations, api and internal/version.
// Its test runs in `make test-unit` and fails the build when a change breaks a rule.
package deprules
