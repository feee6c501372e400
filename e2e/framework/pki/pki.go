// Package pki issues the throw-away credentials the harness gives a test cluster: an ECDSA P-256
// certificate authority, leaf certificates it signs, and random bearer tokens. Every certificate
// is valid from an hour ago until a day from now, so clock skew between the test and the
// processes it starts never matters.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

// NewCA generates a CA key and a self-signed CA certificate with serial 1 and the given common
// name.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	setValidity(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, PEM: certPEM(der)}, nil
}

// Issue generates a P-256 key and signs a certificate for it from tmpl: the caller sets the
// serial, subject, key usages and names; Issue sets the validity. It returns the certificate
// and the key, both PEM-encoded (the key as "EC PRIVATE KEY").
func (ca *CA) Issue(tmpl *x509.Certificate) (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	t := *tmpl
	setValidity(&t)
	der, err := x509.CreateCertificate(rand.Reader, &t, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return certPEM(der), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// Token returns a random bearer token (24 random bytes, hex-encoded).
func Token() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func setValidity(t *x509.Certificate) {
	now := time.Now()
	t.NotBefore = now.Add(-time.Hour)
	t.NotAfter = now.Add(24 * time.Hour)
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
