package cluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/portico-lb/portico/e2e/framework/pki"
)

// credentials are generated per cluster: a CA and serving certificate for kube-apiserver, a
// service-account signing key, and a static admin bearer token.
type credentials struct {
	caPEM      []byte
	certFile   string
	keyFile    string
	saKeyFile  string
	saPubFile  string
	tokenFile  string
	adminToken string
}

func writeCredentials(dir string, hosts []net.IP, tokens []Token) (*credentials, error) {
	c := &credentials{
		certFile:  filepath.Join(dir, "apiserver.crt"),
		keyFile:   filepath.Join(dir, "apiserver.key"),
		saKeyFile: filepath.Join(dir, "sa.key"),
		saPubFile: filepath.Join(dir, "sa.pub"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
	}
	ca, err := pki.NewCA("portico-test-ca")
	if err != nil {
		return nil, err
	}
	c.caPEM = ca.PEM
	srvCert, srvKey, err := ca.Issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  hosts,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	chain := append(srvCert, c.caPEM...)
	if err := os.WriteFile(c.certFile, chain, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.keyFile, srvKey, 0o600); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.saKeyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.saPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}), 0o600); err != nil {
		return nil, err
	}

	if c.adminToken, err = pki.Token(); err != nil {
		return nil, err
	}
	lines := fmt.Sprintf("%s,portico-admin,portico-admin,\"system:masters\"\n", c.adminToken)
	for _, t := range tokens {
		lines += fmt.Sprintf("%s,%s,%s,\"%s\"\n", t.Token, t.User, t.User, strings.Join(t.Groups, ","))
	}
	if err := os.WriteFile(c.tokenFile, []byte(lines), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}
