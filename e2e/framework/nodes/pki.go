package nodes

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"os"
	"path/filepath"

	"github.com/portico-lb/portico/e2e/framework/pki"
)

// kubeletClientPKI is what kube-apiserver presents to kubelets (exec, logs, port-forward): a
// client certificate in group system:masters, signed by a CA that every kubelet trusts
// (authentication.x509.clientCAFile). The kubelets' serving certificates are self-signed by
// each kubelet; the apiserver does not verify them (no --kubelet-certificate-authority).
type kubeletClientPKI struct {
	caFile, certFile, keyFile string
}

func writeKubeletClientPKI(dir string) (kubeletClientPKI, error) {
	p := kubeletClientPKI{
		caFile:   filepath.Join(dir, "kubelet-client-ca.crt"),
		certFile: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		keyFile:  filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	ca, err := pki.NewCA("portico-test-kubelet-client-ca")
	if err != nil {
		return p, fmt.Errorf("kubelet client CA: %w", err)
	}
	cert, key, err := ca.Issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return p, fmt.Errorf("kubelet client certificate: %w", err)
	}
	files := map[string][]byte{p.caFile: ca.PEM, p.certFile: cert, p.keyFile: key}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return p, err
		}
	}
	return p, nil
}
