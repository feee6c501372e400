package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "portico-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  hosts,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), c.caPEM...)
	if err := os.WriteFile(c.certFile, chain, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}), 0o600); err != nil {
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

	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	c.adminToken = hex.EncodeToString(tok)
	lines := fmt.Sprintf("%s,portico-admin,portico-admin,\"system:masters\"\n", c.adminToken)
	for _, t := range tokens {
		lines += fmt.Sprintf("%s,%s,%s,\"%s\"\n", t.Token, t.User, t.User, strings.Join(t.Groups, ","))
	}
	if err := os.WriteFile(c.tokenFile, []byte(lines), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}
